"""Attention layer benchmark: forward + backward time and peak memory, ratios to MHA.

Every variant (DAMCHA's and the cross-head baselines', each fused and explicit) runs side
by side in one process, their timed repetitions interleaved so that machine noise hits
all of them alike. On a CUDA GPU the layers run in bf16 autocast and the SDPA kernel that
ran is reported.

    python -m benchmarks.attention                       # T = 256, 1024, 4096; D=256, H=8
    python -m benchmarks.attention --lengths 1024 --reps 9
    python -m benchmarks.attention --causal --lengths 1024 4096   # causal targets, met or missed
    python -m benchmarks.attention --only tha dcmha colmha mma moa --lengths 1024 4096
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from studies.run import integer_from
from trainers.attention import CROSS_HEAD_BASELINES, DAMCHA, MultiHeadAttention, build_attention, reference_attention
from trainers.measure import attention_kernels, device_name, interleaved_seconds, peak_memory


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


def variants(d_model: int, heads: int, width: int, *, causal: bool) -> list[Variant]:
    """MHA, DAMCHA over ranks, depths, forms and modes, its explicit reference, and each
    cross-head baseline at its default knobs, fused and explicit.

    Causal: the layer defaults (one metric per ``DEFAULT_METRIC_CHUNK`` positions) beside
    one metric per position (``metric_chunk=1``).
    """

    def damcha(**knobs) -> DAMCHA:
        defaults = {"metric_rank": 16, "generator_depth": 2, "causal": causal}
        return DAMCHA(d_model, heads, generator_width=width, **(defaults | knobs))

    rows = [Variant("mha", MultiHeadAttention(d_model, heads, causal=causal))]
    if causal:
        rows.append(Variant("damcha r16 g2", damcha()))
        rows.append(Variant("damcha r16 g2 mahalanobis", damcha(metric_form="mahalanobis")))
        rows.append(Variant("damcha r16 g2 rowsum", damcha(metric_mode="rowsum")))
        rows.append(Variant("damcha full g2 rowsum", damcha(metric_mode="rowsum", metric_rank="full")))
        for name, knobs in (
            ("damcha r16 g2", {}),
            ("damcha r16 g2 rowsum", {"metric_mode": "rowsum"}),
            ("damcha full g2 rowsum", {"metric_mode": "rowsum", "metric_rank": "full"}),
        ):
            rows.append(Variant(f"{name} chunk 1", damcha(metric_chunk=1, **knobs)))
    else:
        for rank in (4, 16, 64):
            for depth in (0, 2):
                rows.append(Variant(f"damcha r{rank} g{depth}", damcha(metric_rank=rank, generator_depth=depth)))
        rows.append(Variant("damcha r16 g2 mahalanobis", damcha(metric_form="mahalanobis")))
        rows.append(Variant("damcha r16 g2 rowsum", damcha(metric_mode="rowsum")))
        rows.append(Variant("damcha full g2 rowsum", damcha(metric_mode="rowsum", metric_rank="full")))
    rows.append(Variant("explicit damcha r16 g2", damcha(), explicit=True))
    for name in CROSS_HEAD_BASELINES:
        layer = build_attention(name, d_model, heads, causal=causal)
        rows += [Variant(name, layer), Variant(f"explicit {name}", layer, explicit=True)]
    return rows


# Causal targets at the layer defaults: (rows, worst time ratio, worst memory ratio) against MHA.
CAUSAL_TARGETS = (
    (("damcha r16 g2", "damcha r16 g2 mahalanobis", "damcha r16 g2 rowsum"), 1.15, 1.3),
    (("damcha full g2 rowsum",), 1.5, None),
)


def causal_targets(length: int, seconds: dict[str, float], memory: dict[str, int]) -> list[str]:
    """One line per causal target: the worst ratio to MHA among its rows, met or missed."""
    lines = []
    for names, time_limit, memory_limit in CAUSAL_TARGETS:
        time_ratio = max(seconds[name] / seconds["mha"] for name in names)
        line = f"T={length} {', '.join(names)}: time {time_ratio:.2f}x MHA (target <= {time_limit})"
        met = time_ratio <= time_limit
        if memory_limit is not None:
            memory_ratio = max(memory[name] / max(memory["mha"], 1) for name in names)
            line += f", peak memory {memory_ratio:.2f}x MHA (target <= {memory_limit})"
            met = met and memory_ratio <= memory_limit
        lines.append(line + (": met" if met else ": MISSED"))
    explicit = seconds["explicit damcha r16 g2"] / seconds["damcha r16 g2"]
    lines.append(f"T={length} explicit-score form {explicit:.1f}x the fused one's time (target >= 5 at 4096)")
    return lines


def benchmark(
    lengths: list[int],
    *,
    d_model: int,
    heads: int,
    width: int,
    tokens: int,
    reps: int,
    causal: bool,
    only: list[str] | None = None,
) -> None:
    """Print one table per sequence length (and, causal, how the targets came out).

    Args:
        only: Keep the rows whose name contains one of these words (MHA, the reference, always).
    """
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    rows = [
        row
        for row in variants(d_model, heads, width, causal=causal)
        if row.name == "mha" or not only or any(word in row.name.split() for word in only)
    ]
    for row in rows:
        row.layer.to(device)
    print(
        f"device: {device_name(device)}; D={d_model}, H={heads}, generator width {width}, "
        f"{'bf16 autocast' if device.type == 'cuda' else 'fp32'}, {'causal' if causal else 'bidirectional'}; "
        f"median of {reps} fwd+bwd steps"
    )
    for length in lengths:
        batch = max(1, tokens // length)
        x = torch.randn(batch, length, d_model, device=device, requires_grad=True)
        steps = {row.name: row.step(x) for row in rows}
        memory: dict[str, int] = {}
        kernels: dict[str, str] = {}
        with autocast:
            for row in rows:  # warm-up, kernel check and peak memory, one variant at a time
                steps[row.name]()
                kernels[row.name] = ",".join(sorted(attention_kernels(steps[row.name]))) or "explicit"
                with peak_memory(device) as peak:
                    steps[row.name]()
                memory[row.name] = peak["bytes"]
            times = interleaved_seconds(steps, reps, device)
        seconds = {name: statistics.median(values) for name, values in times.items()}
        base_memory = max(memory["mha"], 1)
        print(f"\nT={length}, batch {batch}")
        print(f"{'variant':<30}{'ms':>10}{'x MHA':>8}{'peak MiB':>10}{'x MHA':>8}  kernel")
        for row in rows:
            print(
                f"{row.name:<30}{seconds[row.name] * 1e3:>10.1f}{seconds[row.name] / seconds['mha']:>8.2f}"
                f"{memory[row.name] / 2**20:>10.1f}{memory[row.name] / base_memory:>8.2f}  {kernels[row.name]}"
            )
        if causal and not only:
            print("\n".join(causal_targets(length, seconds, memory)))


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.attention", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--lengths", type=int, nargs="+", default=[256, 1024, 4096], help="sequence lengths (default: 256 1024 4096)"
    )
    parser.add_argument("--d-model", type=integer_from(1), default=256, help="model width D (default: 256)")
    parser.add_argument("--heads", type=integer_from(1), default=8, help="head count H (default: 8)")
    parser.add_argument("--generator-width", type=integer_from(1), default=64, help="DAMCHA generator width (default: 64)")
    parser.add_argument(
        "--tokens", type=integer_from(1), default=8192, help="tokens per batch: batch = tokens // T (default: 8192)"
    )
    parser.add_argument("--reps", type=integer_from(1), default=5, help="timed repetitions per variant (default: 5)")
    parser.add_argument("--causal", action="store_true", help="causal layers: the chunked metric against one per position")
    parser.add_argument("--threads", type=integer_from(1), default=None, help="CPU threads (default: torch's)")
    parser.add_argument(
        "--only", nargs="+", metavar="WORD", help="rows whose name has one of these words, e.g. tha moa damcha (MHA always)"
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    benchmark(
        args.lengths,
        d_model=args.d_model,
        heads=args.heads,
        width=args.generator_width,
        tokens=args.tokens,
        reps=args.reps,
        causal=args.causal,
        only=args.only,
    )


if __name__ == "__main__":
    main()
