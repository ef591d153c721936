"""Cost accounting: analytic FLOPs against the FLOP counter, parameter roles, memory."""

from __future__ import annotations

import itertools

import pytest
import torch

from tests.trainers import authors_knobs, counting_backend
from trainers.config import ModelConfig
from trainers.costs import count_parameters, counted_flops, model_flops
from trainers.measure import interleaved_seconds, peak_memory
from trainers.models import build_model

LENGTH, BATCH = 20, 2

DAMCHA_GRID = [
    dict(attention="damcha", metric_mode=mode, metric_form=form, metric_rank=rank, generator_depth=depth, sharing=sharing)
    for mode, form, rank, depth, sharing in itertools.product(
        ("cross", "rowsum"), ("bilinear", "mahalanobis"), (4, "full"), (0, 2), ("layer", "group:2", "stack")
    )
    if not (mode == "rowsum" and form == "mahalanobis")
]
CONFIGS = (
    [
        dict(architecture=architecture, **knobs)
        for architecture in ("encoder", "pair", "decoder")
        for knobs in [dict(attention="mha"), *DAMCHA_GRID[:: 3 if architecture != "encoder" else 1]]
    ]
    + [  # causal metrics per chunk: one per position, chunks that divide LENGTH=20 or leave a remainder
        dict(
            architecture="decoder", attention="damcha", metric_mode=mode, metric_rank=rank, generator_depth=2, metric_chunk=chunk
        )
        for mode, rank, chunk in itertools.product(("cross", "rowsum"), (4, "full"), (1, 5, 8))
    ]
    + [dict(architecture=architecture, **authors_knobs((24, 48))) for architecture in ("encoder", "decoder")]
    + [  # the cross-head baselines, their own knobs away from the defaults
        dict(architecture=architecture, attention=name, **knobs)
        for architecture in ("encoder", "pair", "decoder")
        for name, knobs in (
            ("tha", {}),
            ("dcmha", {"router_rank": 8}),
            ("colmha", {}),
            ("mma", {"local_window": 4}),
            ("moa", {"expert_factor": 4}),
        )
    ]
)


def _config(**knobs) -> ModelConfig:
    base = dict(vocab_size=30, num_classes=5, max_length=LENGTH, d_model=32, num_heads=4, num_layers=3, generator_width=16)
    return ModelConfig(**(base | knobs))


def _forward(model, config: ModelConfig):
    tokens = torch.randint(1, 30, (BATCH, LENGTH))
    mask = torch.ones(BATCH, LENGTH, dtype=torch.bool)
    mask[0, 12:] = False
    if config.architecture == "pair":
        return lambda: model(tokens, mask, tokens.flip(0), mask.flip(0))
    return lambda: model(tokens, mask)


@pytest.mark.parametrize("knobs", CONFIGS, ids=lambda k: "-".join(map(str, k.values())))
def test_analytic_flops_match_the_counter(knobs: dict) -> None:
    config = _config(**knobs)
    forward = _forward(build_model(config), config)
    analytic = model_flops(config, LENGTH)

    assert counted_flops(forward) == pytest.approx(BATCH * analytic.forward, rel=0.05)
    assert counted_flops(lambda: forward().sum().backward()) == pytest.approx(analytic.training_step(BATCH), rel=0.05)


def test_damcha_costs_more_flops_only_through_its_metric() -> None:
    mha = model_flops(_config(attention="mha"), LENGTH)
    damcha = model_flops(_config(attention="damcha", metric_rank=4, generator_depth=1), LENGTH)
    assert damcha.attention_core == mha.attention_core
    assert 0 < damcha.forward - mha.forward < 0.1 * mha.forward


def test_parameter_roles() -> None:
    d, layers = 32, 3
    mha = count_parameters(build_model(_config(attention="mha")))
    assert mha.generator == 0
    assert mha.attention == layers * (4 * d * d + 4 * d)

    layer = count_parameters(build_model(_config(attention="damcha", metric_rank=4, generator_depth=0, sharing="layer")))
    stack = count_parameters(build_model(_config(attention="damcha", metric_rank=4, generator_depth=0, sharing="stack")))
    assert layer.generator == layers * 2 * d * 4  # a static U, V per layer
    assert stack.generator == 2 * d * 4
    assert layer.attention - layer.generator == mha.attention
    assert layer.total - stack.total == layer.generator - stack.generator


def test_peak_memory_counts_tensors_alive_at_once() -> None:
    with peak_memory(torch.device("cpu")) as memory:
        first = torch.ones(64, 1024, 1024)  # 256 MiB
        view = first[:32] * 2  # +128 MiB, alive with the first
        del first, view
        torch.ones(32, 1024, 1024)  # 128 MiB after both were freed: no new peak
    assert memory["bytes"] == 384 * 2**20


def test_interleaved_steps_are_each_timed_once_per_round() -> None:
    calls: list[str] = []
    times = interleaved_seconds({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3, torch.device("cpu"))
    assert calls == ["a", "b"] * 3 and {name: len(values) for name, values in times.items()} == {"a": 3, "b": 3}
    assert all(value >= 0 for values in times.values() for value in values)


@pytest.mark.parametrize(
    ("name", "bf16"),
    [
        ("NVIDIA H100 80GB HBM3", 989e12),
        ("NVIDIA H100 PCIe", 756e12),
        ("NVIDIA H200", 989e12),
        ("NVIDIA H100 NVL", 835e12),
        ("NVIDIA H100 Something New", None),
        ("cpu", None),
    ],
)
def test_model_flop_utilisation_knows_exact_parts_only(name: str, bf16: float | None) -> None:
    from trainers.measure import peak_flops_of

    assert peak_flops_of(name, "bf16") == bf16


def test_kernels_of_a_compiled_model_are_named_and_it_keeps_running_compiled() -> None:
    """``attention_kernels`` reads the profiler, so a compiled model is checked as it runs:
    the same kernels as the eager model, and its compiled graph still serves later calls."""
    from trainers.measure import attention_kernels

    graph_calls: list[int] = []
    config = ModelConfig(vocab_size=20, num_classes=3, max_length=40, d_model=16, num_heads=2, mlp_width=16, attention="mha")
    eager = build_model(config)
    model = torch.compile(eager, backend=counting_backend(graph_calls), dynamic=True)
    tokens, mask = torch.randint(2, 20, (3, 30)), torch.ones(3, 30, dtype=torch.bool)  # (B, T) each
    mask[0, 20:] = False

    def step(net: torch.nn.Module) -> None:
        net(tokens, mask).sum().backward()

    compiled_kernels = attention_kernels(lambda: step(model))
    expected = {"flash_attention_for_cpu", "flash_attention_for_cpu_backward"}
    assert compiled_kernels == attention_kernels(lambda: step(eager)) == expected
    calls = len(graph_calls)
    step(model)
    assert calls > 0 and len(graph_calls) > calls
