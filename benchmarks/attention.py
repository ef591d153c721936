"""Attention layer benchmark: forward + backward time and peak memory, ratios to MHA.

Every variant and the explicit-score reference run side by side in one process, their
timed repetitions interleaved so that machine noise hits all of them alike. On a CUDA
GPU the layers run in bf16 autocast and the SDPA kernel that ran is reported.

    python -m benchmarks.attention                       # T = 256, 1024, 4096; D=256, H=8
    python -m benchmarks.attention --lengths 1024 --reps 9
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from trainers.attention import DAMCHA, MultiHeadAttention, reference_attention
from trainers.costs import attention_kernels, device_name, peak_memory


@dataclass(frozen=True)
class Variant:
    """One row of the table: a layer and how to call it."""

    name: str
    layer: nn.Module
    explicit: bool = False

    def step(self, x: torch.Tensor) -> Callable[[], None]:
        def run() -> None:
            out = reference_attention(self.layer, x) if self.explicit else self.layer(x)
            out.float().sum().backward()

        return run


def variants(d_model: int, heads: int, width: int) -> list[Variant]:
    """MHA, DAMCHA over ranks, depths, forms and modes, and the explicit reference."""
    def damcha(**knobs) -> DAMCHA:
        return DAMCHA(d_model, heads, generator_width=width, **({"metric_rank": 16, "generator_depth": 2} | knobs))

    rows = [Variant("mha", MultiHeadAttention(d_model, heads))]
    for rank in (4, 16, 64):
        for depth in (0, 2):
            rows.append(Variant(f"damcha r{rank} g{depth}", damcha(metric_rank=rank, generator_depth=depth)))
    rows.append(Variant("damcha r16 g2 mahalanobis", damcha(metric_form="mahalanobis")))
    rows.append(Variant("damcha r16 g2 rowsum", damcha(metric_mode="rowsum")))
    rows.append(Variant("damcha full g2 rowsum", damcha(metric_mode="rowsum", metric_rank="full")))
    rows.append(Variant("explicit damcha r16 g2", damcha(), explicit=True))
    return rows


def benchmark(lengths: list[int], *, d_model: int, heads: int, width: int, tokens: int, reps: int) -> None:
    """Print one table per sequence length."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    )
    rows = variants(d_model, heads, width)
    for row in rows:
        row.layer.to(device)
    print(f"device: {device_name(device)}; D={d_model}, H={heads}, generator width {width}, "
          f"{'bf16 autocast' if device.type == 'cuda' else 'fp32'}; median of {reps} fwd+bwd steps")
    for length in lengths:
        batch = max(1, tokens // length)
        x = torch.randn(batch, length, d_model, device=device, requires_grad=True)
        steps = {row.name: row.step(x) for row in rows}
        times: dict[str, list[float]] = {row.name: [] for row in rows}
        memory: dict[str, int] = {}
        kernels: dict[str, str] = {}
        with autocast:
            for row in rows:  # warm-up, kernel check and peak memory, one variant at a time
                steps[row.name]()
                kernels[row.name] = ",".join(sorted(attention_kernels(steps[row.name]))) or "explicit"
                with peak_memory(device) as peak:
                    steps[row.name]()
                memory[row.name] = peak["bytes"]
            for _ in range(reps):  # interleaved timing
                for row in rows:
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                    start = time.perf_counter()
                    steps[row.name]()
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                    times[row.name].append(time.perf_counter() - start)
        base_time = statistics.median(times["mha"])
        base_memory = max(memory["mha"], 1)
        print(f"\nT={length}, batch {batch}")
        print(f"{'variant':<28}{'ms':>10}{'x MHA':>8}{'peak MiB':>10}{'x MHA':>8}  kernel")
        for row in rows:
            seconds = statistics.median(times[row.name])
            print(
                f"{row.name:<28}{seconds * 1e3:>10.1f}{seconds / base_time:>8.2f}"
                f"{memory[row.name] / 2**20:>10.1f}{memory[row.name] / base_memory:>8.2f}  {kernels[row.name]}"
            )


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096], help="sequence lengths (default: 256 1024 4096)")
    parser.add_argument("--d-model", type=int, default=256, help="model width D (default: 256)")
    parser.add_argument("--heads", type=int, default=8, help="head count H (default: 8)")
    parser.add_argument("--generator-width", type=int, default=64, help="DAMCHA generator width (default: 64)")
    parser.add_argument("--tokens", type=int, default=8192, help="tokens per batch: batch = tokens // T (default: 8192)")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions per variant (default: 5)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    benchmark(args.lengths, d_model=args.d_model, heads=args.heads, width=args.generator_width, tokens=args.tokens, reps=args.reps)


if __name__ == "__main__":
    main()
