"""Attention of a padded batch, forward and backward, in eager mode: the boolean mask against
FlashAttention's variable-length kernel (``trainers.attention.sdpa.varlen_attention``, CUDA
only), and the same batch without padding as the bound. Each row names its kernels; times
are medians of interleaved repetitions, with ratios to the masked call in the same run.
``fused_attention`` takes the mask in eager mode and the variable-length kernel in compiled
models (where the mask measured far slower: see its module).

Two padding profiles: ``bucketed`` (rows a few percent shorter than the longest, as
length-bucketed batches are) and ``uneven`` (lengths spread from a quarter of the longest).

    python -m benchmarks.padded_attention                       # GPU: T = 512 ... 4096, bf16
    python -m benchmarks.padded_attention --lengths 256 --reps 3   # CPU: the masked call alone
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from torch import Tensor

from common.outputs import exit_with
from studies.run import integer_from
from trainers.attention.sdpa import attention_mask, varlen_attention, varlen_eligible
from trainers.measure import attention_kernels, interleaved_seconds
from trainers.train import resolve_device


def padding_mask(profile: str, batch: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """(B, T) bool, right-padded, the last row full."""
    shortest = length - length // 16 if profile == "bucketed" else length // 4
    lengths = torch.randint(shortest, length + 1, (batch,), generator=generator)
    lengths[-1] = length
    return torch.arange(length)[None, :] < lengths[:, None]


def compare(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, causal: bool, reps: int) -> dict[str, tuple[float, float, str]]:
    """Time forward and backward of each way to attend over one padded batch.

    Args:
        q, k, v: (B, H, T, e), requiring grad.
        mask: (B, T) bool, True = real token.
        causal: Causal attention.
        reps: Interleaved repetitions.

    Returns:
        Call -> (median seconds, ratio to the masked call, its kernels).
    """
    length, grad = q.shape[-2], torch.randn_like(q)
    calls = {
        "unpadded": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        "masked": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask(mask, length, causal)),
    }
    if varlen_eligible(q, k, v, 0.0):
        calls["varlen"] = lambda: varlen_attention(q, k, v, mask, causal=causal)
    steps = {name: (lambda call=call: call().backward(grad)) for name, call in calls.items()}
    kernels = {name: ",".join(sorted(attention_kernels(step))) for name, step in steps.items()}
    times = {name: statistics.median(seconds) for name, seconds in interleaved_seconds(steps, reps, q.device).items()}
    return {name: (times[name], times[name] / times["masked"], kernels[name]) for name in calls}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.padded_attention", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", type=integer_from(1), nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--tokens", type=integer_from(1), default=65536, help="positions per batch; batch = tokens / T")
    parser.add_argument("--heads", type=integer_from(1), default=8)
    parser.add_argument("--width", type=integer_from(1), default=64, help="head width")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--reps", type=integer_from(1), default=10)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    generator = torch.Generator().manual_seed(0)
    print(f"{device}, {dtype}, H={args.heads}, head width {args.width}, {args.tokens} positions per batch, causal={args.causal}")
    print(f"{'T':>6} {'padding':<9} {'real %':>6}  {'call':<9} {'ms':>8} {'×masked':>8}  kernels")
    for length in args.lengths:
        batch = max(1, args.tokens // length)
        q, k, v = (
            torch.randn(batch, args.heads, length, args.width, device=device, dtype=dtype, requires_grad=True) for _ in range(3)
        )  # (B, H, T, e) each
        for profile in ("bucketed", "uneven"):
            mask = padding_mask(profile, batch, length, generator).to(device)  # (B, T)
            real = 100 * float(mask.float().mean())
            for name, (seconds, ratio, kernels) in compare(q, k, v, mask, args.causal, args.reps).items():
                row = f"{length:>6} {profile:<9} {real:>6.1f}  {name:<9} {1000 * seconds:>8.2f} {ratio:>8.2f}  {kernels}"
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    exit_with(main)
