"""Whole-model training step: MHA, DAMCHA variants and explicit-score DAMCHA, side by side.

For each sequence length every variant is built and checked: the attention kernels of a
padded training step (the call training makes: a padding mask, forward and backward) are
named, and a fused variant that falls back to the unfused ``math`` kernel fails the run.
Then the variants are timed with repetitions interleaved so that machine noise hits all
alike, on batches without padding (no mask), or with ``--padded`` on the padded batch. The
table printed last gives step time, tokens/s, peak memory and model FLOP utilisation,
with ratios to MHA, and each variant's kernels. On a CUDA GPU the step runs in bf16
autocast with fused AdamW. With --compile, the kernels are those of the compiled model (a
padded batch takes FlashAttention's variable-length kernel there on GPUs), and on a CPU
memory is measured on the eager model: a dispatch mode around the compiled one would stop
it compiling.

    python -m benchmarks.train_step                                  # GPU sizes: T = 512 ... 16384, D=512, H=8, 4 layers
    python -m benchmarks.train_step --lengths 1024 --tokens 4096     # the CPU target (T=1K)
    python -m benchmarks.train_step --lengths 64 128 --d-model 64 --layers 2 --tokens 512 --reps 1   # seconds
    python -m benchmarks.train_step --causal --lengths 1024 4096 --d-model 256 --tokens 8192   # DecoderLM rows
    python -m benchmarks.train_step --only "damcha r16 g2 stack" --padded --compile   # one variant against MHA
"""

from __future__ import annotations

import argparse
import gc
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from common.outputs import exit_with
from studies.run import integer_from, positive_number
from trainers.compilation import compiled
from trainers.config import ModelConfig
from trainers.costs import model_flops
from trainers.measure import attention_kernels, device_name, interleaved_seconds, peak_flops, peak_memory
from trainers.memory import is_out_of_memory
from trainers.models import build_model
from trainers.optimizer import adamw
from trainers.train import TrainConfig, autocast, resolve_device

VARIANTS: dict[str, dict] = {
    "mha": {"attention": "mha"},
    "damcha r4 g0 stack": {"metric_rank": 4, "generator_depth": 0, "sharing": "stack"},
    "damcha r16 g0 stack": {"metric_rank": 16, "generator_depth": 0, "sharing": "stack"},
    "damcha r16 g2 stack": {"metric_rank": 16, "generator_depth": 2, "sharing": "stack"},
    "damcha r32 g2 stack": {"metric_rank": 32, "generator_depth": 2, "sharing": "stack"},
    "damcha r16 g2 group:2": {"metric_rank": 16, "generator_depth": 2, "sharing": "group:2"},
    "damcha r16 g2 layer": {"metric_rank": 16, "generator_depth": 2, "sharing": "layer"},
    "damcha r16 g2 stack mahalanobis": {
        "metric_rank": 16,
        "generator_depth": 2,
        "sharing": "stack",
        "metric_form": "mahalanobis",
    },
    "damcha r16 g2 stack rowsum": {"metric_rank": 16, "generator_depth": 2, "sharing": "stack", "metric_mode": "rowsum"},
    "explicit damcha r16 g2 stack": {"attention": "damcha_explicit", "metric_rank": 16, "generator_depth": 2, "sharing": "stack"},
}
# Causal (DecoderLM) only: the metric per position that the default chunk replaces, and full rank.
CAUSAL_VARIANTS: dict[str, dict] = {
    "damcha r16 g2 stack chunk 1": {"metric_rank": 16, "generator_depth": 2, "sharing": "stack", "metric_chunk": 1},
    "damcha full g2 stack rowsum": {"metric_rank": "full", "generator_depth": 2, "sharing": "stack", "metric_mode": "rowsum"},
}
TARGET_VARIANTS = [
    name
    for name, knobs in VARIANTS.items()
    if knobs.get("sharing") == "stack"
    and name.startswith("damcha")
    and knobs.get("metric_mode") is None
    and knobs.get("metric_form") is None
]


@dataclass
class Row:
    """One variant at one length."""

    length: int
    variant: str
    seconds: float = float("nan")
    tokens_per_s: float = float("nan")
    peak_bytes: float = float("nan")
    mfu: float = float("nan")
    kernels: str = ""
    status: str = "ok"


def _explicit_bytes(batch: int, heads: int, length: int, layers: int, element: int) -> int:
    """Rough memory of explicit scores kept for backward: scores, softmax and its grad per layer."""
    return 3 * batch * heads * (length + 1) ** 2 * element * layers


def _step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    tokens: torch.Tensor,
    labels: torch.Tensor,
    device: torch.device,
    precision: str,
    mask: torch.Tensor | None = None,
) -> Callable[[], None]:
    def run() -> None:
        with autocast(device, precision):
            logits = model(tokens, mask)  # (B, C) or, decoder, (B, T, V); no mask: SDPA may pick FlashAttention
        if logits.dim() == 3:  # next-token prediction
            F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten()).backward()
        else:
            F.cross_entropy(logits.float(), labels).backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return run


def variants(causal: bool, only: list[str] | None = None) -> dict[str, dict]:
    """The rows to run: every variant, and the causal-only ones for the decoder; with
    ``only``, those variants (MHA always: the ratios are to it).

    Raises:
        SystemExit: ``only`` names a variant that does not exist.
    """
    rows = VARIANTS | CAUSAL_VARIANTS if causal else VARIANTS
    if only is None:
        return rows
    if unknown := sorted(set(only) - set(rows)):
        raise SystemExit(f"unknown variant(s) {unknown}; allowed: {sorted(rows)}")
    return {name: knobs for name, knobs in rows.items() if name == "mha" or name in only}


def measure_length(length: int, args: argparse.Namespace, device: torch.device) -> list[Row]:
    """Build, check and time every variant at one sequence length."""
    batch = max(1, args.tokens // length)
    base = {
        "vocab_size": 258,
        "num_classes": 10,
        "max_length": length,
        "d_model": args.d_model,
        "num_heads": args.heads,
        "num_layers": args.layers,
        "mlp_width": 4 * args.d_model,
        "pooling": "mean",
        "architecture": "decoder" if args.causal else "encoder",
    }
    tokens = torch.randint(2, 258, (batch, length), device=device)
    labels = torch.randint(0, 10, (batch,), device=device)
    padded = torch.ones(batch, length, dtype=torch.bool, device=device)  # (B, T): the last example a quarter shorter
    padded[-1, length - length // 4 :] = False
    rows, steps = [], {}
    element = 2 if args.precision == "bf16" else 4
    for name, knobs in variants(args.causal, args.only).items():
        row = Row(length, name)
        rows.append(row)
        config = ModelConfig(**(base | {"attention": "damcha"} | knobs))
        if (
            config.attention == "damcha_explicit"
            and _explicit_bytes(batch, args.heads, length, args.layers, element) > args.explicit_limit_gb * 2**30
        ):
            row.status = f"skipped: explicit scores need > {args.explicit_limit_gb:g} GiB"
            continue
        try:
            torch.manual_seed(0)
            eager = build_model(config).to(device)
            model = compiled(eager) if args.compile else eager
            optimizer = adamw(eager, TrainConfig(), device)
            timed_mask = padded if args.padded else None
            step = _step(model, optimizer, tokens, labels, device, args.precision, timed_mask)
            kernels = attention_kernels(_step(model, None, tokens, labels, device, args.precision, padded))  # training's call
            eager.zero_grad(set_to_none=True)
            row.kernels = ",".join(sorted(kernels))
            if config.attention != "damcha_explicit" and any(kernel.startswith("attention_math") for kernel in kernels):
                row.status = f"FALLBACK to the unfused kernel: {row.kernels}"
            step()  # warm-up: optimizer state, kernel selection, compilation
            measured = (
                step
                if device.type == "cuda" or not args.compile
                else _step(eager, optimizer, tokens, labels, device, args.precision, timed_mask)
            )
            with peak_memory(device) as memory:
                measured()
            row.peak_bytes = memory["bytes"]
            steps[name] = step
        except (RuntimeError, torch.OutOfMemoryError) as error:
            if not is_out_of_memory(error):
                raise
            row.status = "out of memory"
        finally:
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    times = interleaved_seconds(steps, args.reps, device)
    peak = peak_flops(device, args.precision)
    for row in rows:
        if row.variant in times:
            row.seconds = statistics.median(times[row.variant])
            row.tokens_per_s = batch * length / row.seconds
            config = ModelConfig(**(base | {"attention": "damcha"} | variants(args.causal, args.only)[row.variant]))
            row.mfu = model_flops(config, length).training_step(batch) / row.seconds / peak if peak else float("nan")
    return rows


def table(rows: list[Row]) -> str:
    """The short table: one line per variant and length, ratios to MHA at the same length."""
    mha = {row.length: row for row in rows if row.variant == "mha"}
    lines = [
        f"{'T':>6}  {'variant':<32} {'ms/step':>9} {'×MHA':>6} {'tokens/s':>10} {'peak MiB':>9} {'×MHA':>6} {'MFU':>6}  "
        f"{'attention kernels (forward)':<32} status"
    ]
    for row in rows:
        base = mha[row.length]
        mfu = "-" if row.mfu != row.mfu else f"{100 * row.mfu:.1f}%"
        lines.append(
            f"{row.length:>6}  {row.variant:<32} {1000 * row.seconds:>9.1f} {row.seconds / base.seconds:>6.2f} "
            f"{row.tokens_per_s:>10.0f} {row.peak_bytes / 2**20:>9.1f} {row.peak_bytes / base.peak_bytes:>6.2f} "
            f"{mfu:>6}  {_forward_kernels(row.kernels):<32} {row.status}"
        )
    return "\n".join(lines)


def _forward_kernels(kernels: str) -> str:
    """``a,a_backward,b,b_backward`` -> ``a,b`` (each checked with its backward)."""
    return ",".join(kernel for kernel in kernels.split(",") if not kernel.endswith("_backward")) or "-"


def targets(rows: list[Row]) -> str:
    """How the DAMCHA targets came out: worst time and memory ratios, and the explicit form's cost."""
    mha = {row.length: row for row in rows if row.variant == "mha"}
    damcha = [row for row in rows if row.variant in TARGET_VARIANTS and row.status == "ok"]
    lines = []
    if damcha:
        time_ratio = max(row.seconds / mha[row.length].seconds for row in damcha)
        memory_ratio = max(row.peak_bytes / mha[row.length].peak_bytes for row in damcha)
        lines.append(
            f"DAMCHA (rank <= 32, stack sharing): worst step time {time_ratio:.2f}x MHA, "
            f"worst peak memory {memory_ratio:.2f}x MHA"
        )
    for name in ("damcha r16 g2 stack rowsum", *CAUSAL_VARIANTS):
        ratios = [
            (row.seconds / mha[row.length].seconds, row.peak_bytes / mha[row.length].peak_bytes)
            for row in rows
            if row.variant == name and row.status == "ok"
        ]
        if ratios:
            lines.append(
                f"{name}: worst step time {max(r[0] for r in ratios):.2f}x MHA, "
                f"worst peak memory {max(r[1] for r in ratios):.2f}x MHA"
            )
    by_length = {(row.length, row.variant): row for row in rows}
    for length in sorted(mha):
        explicit, fused = by_length.get((length, "explicit damcha r16 g2 stack")), by_length.get((length, "damcha r16 g2 stack"))
        if explicit and fused and explicit.status == "ok" and fused.status == "ok":
            lines.append(
                f"T={length}: explicit-score DAMCHA {explicit.seconds / fused.seconds:.1f}x the fused step time, "
                f"{explicit.peak_bytes / fused.peak_bytes:.1f}x its memory"
            )
        elif explicit and explicit.status != "ok":
            lines.append(f"T={length}: explicit-score DAMCHA {explicit.status}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; exit code 1 when a fused variant fell back to the unfused kernel."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.train_step", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", type=integer_from(1), nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--d-model", type=integer_from(1), default=512)
    parser.add_argument("--heads", type=integer_from(1), default=8)
    parser.add_argument("--layers", type=integer_from(1), default=4)
    parser.add_argument("--tokens", type=integer_from(1), default=16384, help="tokens per step; batch = tokens / T (at least 1)")
    parser.add_argument("--reps", type=integer_from(1), default=5, help="timed steps per variant (median kept)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", choices=("fp32", "bf16"), help="default: bf16 on CUDA, fp32 on CPU")
    parser.add_argument("--compile", action="store_true", help="torch.compile every model")
    parser.add_argument("--causal", action="store_true", help="DecoderLM (next-token loss) instead of the classifier")
    parser.add_argument("--only", nargs="+", metavar="VARIANT", help="time these variants (and MHA) only")
    parser.add_argument("--padded", action="store_true", help="time the padded training step (default: unpadded)")
    parser.add_argument(
        "--explicit-limit-gb", type=positive_number, default=8.0, help="skip the explicit form above this estimate"
    )
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    args.precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
    print(
        f"{device_name(device)}, {args.precision}, {'DecoderLM' if args.causal else 'EncoderClassifier'}, "
        f"D={args.d_model}, H={args.heads}, {args.layers} layers, "
        f"{args.tokens} tokens per step, compile={args.compile}, timed {'padded' if args.padded else 'unpadded'}",
        flush=True,
    )
    rows = []
    for length in args.lengths:
        rows += measure_length(length, args, device)
        print(f"T={length} done", flush=True)
    print(table(rows))
    print(targets(rows))
    return 1 if any(row.status.startswith("FALLBACK") for row in rows) else 0


if __name__ == "__main__":
    exit_with(main)
