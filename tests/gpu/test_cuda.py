"""What only a CUDA GPU can show: the kernels training takes, bf16 against the fp32 oracle,
FlashAttention's variable-length kernel (compiled models' path for padded batches), and a
compiled bf16 training run. Skipped where there is no GPU (CI); ``benchmarks/gpu.sh``
runs them on one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.trainers import authors_knobs
from trainers.attention import ATTENTION, build_attention, reference_attention
from trainers.attention.sdpa import attention_mask, varlen_attention, varlen_eligible
from trainers.compilation import compiled
from trainers.config import ModelConfig
from trainers.data.listops import ListOpsSpec
from trainers.data.loaders import listops_generated
from trainers.data.tokenize import LISTOPS_VOCABULARY
from trainers.measure import attention_kernels, device_name
from trainers.models import build_model
from trainers.train import TrainConfig, train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (benchmarks/gpu.sh runs these on one)")

CUDA = torch.device("cuda")
B, T, D, H = 4, 37, 64, 4  # T unaligned on purpose; head width 16
KNOBS = {
    "damcha": {"metric_rank": 8, "generator_depth": 1, "generator_width": 32},
    "dcmha": {"router_rank": 3},
    "mma": {"local_window": 4},
    "moa": {"expert_factor": 2},
}
FAMILIES = [name for name in ATTENTION if name != "damcha_explicit"]
FUSED_KERNELS = {"flash_attention", "cudnn_attention", "efficient_attention"}


def _padding_mask(left: bool = False) -> torch.Tensor:
    lengths = torch.tensor([T, 20, 1, T - 3], device=CUDA)  # a full row: empty padding segments
    mask = torch.arange(T, device=CUDA)[None, :] < lengths[:, None]  # (B, T)
    return mask.flip(-1) if left else mask


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.detach().float(), want.detach().float()
    return float((got - want).norm() / want.norm())


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("left", [False, True], ids=["right-padded", "left-padded"])
@pytest.mark.parametrize("scale", [None, 0.05])
def test_varlen_kernel_equals_the_masked_kernel_on_real_tokens(causal: bool, left: bool, scale: float | None) -> None:
    """Outputs and gradients of real positions, against SDPA with the boolean mask, both bf16."""
    q, k, v = (torch.randn(B, H, T, 64, device=CUDA, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    mask = _padding_mask(left)
    real = mask[:, None, :, None].expand(B, H, T, 64)  # (B, H, T, e)
    assert varlen_eligible(q, k, v, 0.0)

    def varlen() -> torch.Tensor:
        return varlen_attention(q, k, v, mask, causal=causal, scale=scale)

    def masked() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask(mask, T, causal), scale=scale)

    kernels = attention_kernels(lambda: torch.autograd.grad((varlen() * real).sum(), [q, k, v]))
    outputs, gradients = [], []
    for attend in (varlen, masked):
        out = attend()
        assert torch.isfinite(out).all()
        outputs.append(out[real])
        gradients.append(torch.autograd.grad((out.float() * real).sum(), [q, k, v]))
    assert kernels == {"flash_attention_varlen", "flash_attention_varlen_backward"}
    assert _relative_error(outputs[0], outputs[1]) < 1e-2
    for got, want in zip(*gradients, strict=True):
        assert _relative_error(got, want) < 2e-2


def _layer(name: str, causal: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_attention(name, D, H, causal=causal, **KNOBS.get(name, {})).to(CUDA)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_in_bf16_matches_its_fp32_oracle_on_fused_kernels(name: str, causal: bool) -> None:
    """A padded training call under bf16 autocast runs fused kernels only, forward and
    backward, and its real positions are those of the fp32 explicit reference."""
    layer = _layer(name, causal)
    x = torch.randn(B, T, D, device=CUDA)
    mask = _padding_mask()
    real = mask[..., None].expand(B, T, D)  # (B, T, D)

    def step() -> torch.Tensor:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = layer(x, mask)
        (out.float() * real).sum().backward()
        return out

    kernels = attention_kernels(step)
    forward = {kernel for kernel in kernels if not kernel.endswith("_backward")}
    assert forward and forward <= FUSED_KERNELS, kernels
    assert {f"{kernel}_backward" for kernel in forward} <= kernels, kernels
    layer.zero_grad(set_to_none=True)
    fused = step()
    reference = reference_attention(layer, x, mask)  # fp32, materialised scores
    assert _relative_error(fused[real], reference[real]) < 3e-2


@pytest.mark.parametrize("attention", ["mha", "damcha"])
def test_a_compiled_model_takes_the_varlen_kernel_for_padded_batches_and_eager_the_mask(attention: str) -> None:
    config = ModelConfig(
        vocab_size=20, num_classes=3, max_length=T, d_model=128, num_heads=2, mlp_width=128, attention=attention, metric_rank=8
    )
    eager = build_model(config).to(CUDA)
    model = compiled(eager)
    tokens = torch.randint(2, 20, (B, T), device=CUDA)  # (B, T)

    def step(net: torch.nn.Module) -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = net(tokens, _padding_mask())  # (B, C)
        logits.float().sum().backward()

    assert attention_kernels(lambda: step(model)) == {"flash_attention_varlen", "flash_attention_varlen_backward"}
    forward = {kernel for kernel in attention_kernels(lambda: step(eager)) if not kernel.endswith("_backward")}
    assert forward and forward <= FUSED_KERNELS


@pytest.mark.parametrize(
    "knobs",
    [dict(attention="mha"), dict(attention="damcha", metric_rank=8), authors_knobs((32, 48))],
    ids=["mha", "damcha-cross", "damcha-authors"],
)
def test_compiled_bf16_training_compiles_its_graphs_once_and_reports_gpu_costs(tmp_path: Path, knobs: dict) -> None:
    """A padded ListOps run, compiled, in bf16, one family after another in this process as a reused
    Ray worker runs them: each trial compiles its two graphs (training, evaluation) before its first
    step and none after, under CUDA's own guards too; compile time, throughput, MFU and the
    allocator's peak are recorded."""
    splits = listops_generated(
        ListOpsSpec(seed=0, min_length=20, max_length=120, train_size=512, val_size=64, test_size=64), cache_dir=tmp_path
    )
    config = ModelConfig(
        vocab_size=len(LISTOPS_VOCABULARY), num_classes=10, max_length=120, d_model=64, num_heads=4, mlp_width=128, **knobs
    )
    reports = []
    train(
        config,
        TrainConfig(steps=30, batch_size=16, eval_every=10, device="cuda", precision="bf16", compile=True),
        splits,
        report=lambda step, metrics: reports.append(metrics),
    )
    last = reports[-1]
    assert last["device"] == device_name(CUDA)
    assert [(r["compiled_graphs"], r["recompiles"]) for r in reports] == [(2, 0)] * 3
    assert last["compile_seconds"] > 0 and last["wall_seconds"] > last["compile_seconds"]
    assert last["peak_memory_bytes"] > 0 and last["examples_per_s"] > 0
    if "model_flops_utilisation" in last:  # a known part
        assert 0 < last["model_flops_utilisation"] < 1


@pytest.mark.parametrize("knobs", [dict(attention="mha"), authors_knobs((32, 48))], ids=["mha", "damcha-authors"])
def test_a_compiled_padded_model_is_one_graph(knobs: dict) -> None:
    """No graph break in a padded batch's forward pass (asking the device's capability in traced code
    once broke it at every attention layer)."""
    config = ModelConfig(vocab_size=20, num_classes=3, max_length=T, d_model=128, num_heads=2, mlp_width=128, **knobs)
    model = build_model(config).to(CUDA)
    tokens = torch.randint(2, 20, (B, T), device=CUDA)  # (B, T)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        explanation = torch._dynamo.explain(model)(tokens, _padding_mask())
    assert explanation.graph_break_count == 0, explanation.break_reasons
