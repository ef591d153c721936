"""Fused attention against its explicit reference, and DAMCHA's defining properties."""

from __future__ import annotations

import itertools

import pytest
import torch

from trainers.attention import DAMCHA, Metric, MultiHeadAttention, build_attention, reference_attention
from trainers.registry import UnknownNameError

B, T, D, H = 3, 9, 16, 4

VARIANTS = [
    dict(metric_mode=mode, metric_form=form, metric_rank=rank, generator_depth=depth)
    for mode, form, rank, depth in itertools.product(("cross", "rowsum"), ("bilinear", "mahalanobis"), (3, "full"), (0, 2))
    if not (mode == "rowsum" and form == "mahalanobis")
]


def _ids(variant: dict) -> str:
    return "-".join(str(v) for v in variant.values())


def _damcha(variant: dict, *, causal: bool, perturb: bool = True) -> DAMCHA:
    attn = DAMCHA(D, H, generator_width=8, causal=causal, **variant)
    if perturb:  # leave the identity start, so that the cross-head metric really acts
        with torch.no_grad():
            for p in attn.generator.parameters():
                p.add_(0.3 * torch.randn_like(p))
    return attn


def _inputs(padded: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    x = torch.randn(B, T, D, requires_grad=True)
    if not padded:
        return x, None
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 5:] = False
    mask[2, 2:] = False
    return x, mask


def _loss(out: torch.Tensor, mask: torch.Tensor | None, weights: torch.Tensor) -> torch.Tensor:
    keep = torch.ones(out.shape[:2]) if mask is None else mask.float()
    return (out * weights * keep[..., None]).sum()


@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("variant", [None, *VARIANTS], ids=["mha", *map(_ids, VARIANTS)])
def test_fused_matches_reference_outputs_and_gradients(variant: dict | None, causal: bool, padded: bool) -> None:
    attn = MultiHeadAttention(D, H, causal=causal) if variant is None else _damcha(variant, causal=causal)
    x, mask = _inputs(padded)
    weights = torch.randn(B, T, D)

    fused = attn(x, mask)
    fused_grads = torch.autograd.grad(_loss(fused, mask, weights), [x, *attn.parameters()])
    reference = reference_attention(attn, x, mask)
    reference_grads = torch.autograd.grad(_loss(reference, mask, weights), [x, *attn.parameters()])

    real = torch.ones(B, T, dtype=torch.bool) if mask is None else mask
    torch.testing.assert_close(fused[real], reference[real], atol=2e-5, rtol=1e-4)
    for got, want in zip(fused_grads, reference_grads, strict=True):
        torch.testing.assert_close(got, want, atol=5e-5, rtol=1e-4)


@pytest.mark.parametrize("form", ["bilinear", "mahalanobis"])
@pytest.mark.parametrize("depth", [0, 2])
@pytest.mark.parametrize("causal", [False, True])
def test_new_damcha_is_mha_and_still_learns_its_metric(form: str, depth: int, causal: bool) -> None:
    mha = MultiHeadAttention(D, H, causal=causal)
    damcha = DAMCHA(D, H, metric_rank=4, metric_form=form, generator_depth=depth, generator_width=8, causal=causal)
    missing, unexpected = damcha.load_state_dict(mha.state_dict(), strict=False)
    assert not unexpected and all(name.startswith("generator.") for name in missing)
    x, mask = _inputs(padded=True)

    torch.testing.assert_close(damcha(x, mask), mha(x, mask), atol=1e-6, rtol=1e-6)

    _loss(damcha(x, mask), mask, torch.randn(B, T, D)).backward()
    generator_grads = [p.grad for p in damcha.generator.parameters()]
    assert all(g is not None for g in generator_grads)
    assert sum(g.abs().sum() for g in generator_grads) > 0, "the metric would never leave the identity"


def test_metric_depends_on_input_but_not_on_padding() -> None:
    attn = _damcha(dict(metric_rank=4, generator_depth=2), causal=False)
    x, mask = _inputs(padded=True)
    metric = attn.generate_metric(x, mask)

    other = attn.generate_metric(torch.randn(B, T, D), mask)
    assert not torch.allclose(metric.u, other.u)

    repadded = x.detach().clone()
    repadded[~mask] = 100.0 * torch.randn(int((~mask).sum()), D)  # only padding tokens change
    same = attn.generate_metric(repadded, mask)
    torch.testing.assert_close(same.u, metric.u)
    torch.testing.assert_close(attn(repadded, mask)[mask], attn(x, mask)[mask])


def test_static_metric_ignores_input() -> None:
    attn = _damcha(dict(metric_rank=4, generator_depth=0), causal=False)
    first = attn.generate_metric(torch.randn(B, T, D))
    second = attn.generate_metric(torch.randn(B, T, D))
    torch.testing.assert_close(first.u, second.u)


@pytest.mark.parametrize("variant", [None, *VARIANTS], ids=["mha", *map(_ids, VARIANTS)])
def test_causal_output_ignores_future_tokens(variant: dict | None) -> None:
    attn = MultiHeadAttention(D, H, causal=True) if variant is None else _damcha(variant, causal=True)
    x = torch.randn(B, T, D)
    cut = 4
    changed = x.clone()
    changed[:, cut + 1 :] = torch.randn(B, T - cut - 1, D)
    torch.testing.assert_close(attn(changed)[:, : cut + 1], attn(x)[:, : cut + 1])
    assert not torch.allclose(attn(changed)[:, cut + 1 :], attn(x)[:, cut + 1 :])


def test_cross_head_metric_lets_a_head_read_another_heads_keys() -> None:
    """M = a block permutation: head h must score its query against head h+1's keys."""
    damcha = DAMCHA(D, H, metric_rank="full", generator_depth=0, generator_width=1)
    mha = MultiHeadAttention(D, H)
    mha.load_state_dict(damcha.state_dict(), strict=False)
    d = D // H
    permutation = torch.zeros(D, D)
    for h in range(H):
        j = (h + 1) % H
        permutation[h * d : (h + 1) * d, j * d : (j + 1) * d] = torch.eye(d)
    metric = Metric(full=(permutation - torch.eye(D)).expand(B, D, D))  # M = I + W = permutation
    x = torch.randn(B, T, D)

    q, k, v = mha.project(x)
    rolled_keys = k.view(B, T, H, d).roll(-1, dims=2).reshape(B, T, D)  # head h gets head h+1's keys
    scores = q.view(B, T, H, d).transpose(1, 2) @ rolled_keys.view(B, T, H, d).permute(0, 2, 3, 1) / d**0.5
    expected = mha.out_proj((scores.softmax(-1) @ v.view(B, T, H, d).transpose(1, 2)).transpose(1, 2).reshape(B, T, D))

    torch.testing.assert_close(damcha(x, metric=metric), expected, atol=1e-5, rtol=1e-5)


def test_layer_without_generator_needs_a_metric() -> None:
    attn = DAMCHA(D, H, metric_rank=4, generator_depth=1, generator_width=8, own_generator=False)
    assert attn.generator is None
    with pytest.raises(RuntimeError, match="pass the shared metric"):
        attn(torch.randn(B, T, D))


def test_registry_builds_by_name_and_suggests_close_names() -> None:
    assert isinstance(build_attention("mha", D, H), MultiHeadAttention)
    assert isinstance(build_attention("damcha", D, H, metric_rank=2, generator_depth=1, generator_width=4), DAMCHA)
    with pytest.raises(UnknownNameError, match=r"did you mean 'damcha'\? available: damcha, damcha_explicit, mha"):
        build_attention("damch", D, H)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        (dict(num_heads=3), "num_heads=3 must divide d_model=16"),
        (dict(metric_rank=0), r"metric_rank=0 must be in 1..d_model=16 .*attention='mha'"),
        (dict(metric_rank=17), "metric_rank=17 must be in 1..d_model=16"),
        (dict(metric_rank="low"), "metric_rank='low' must be an integer"),
        (dict(metric_form="cosine"), "metric_form='cosine' is not allowed; allowed: bilinear, mahalanobis"),
        (dict(metric_mode="rows"), "metric_mode='rows' is not allowed; allowed: cross, rowsum"),
        (dict(metric_mode="rowsum", metric_form="mahalanobis"), "not allowed with metric_mode='rowsum'"),
        (dict(generator_depth=-1), "generator_depth=-1 must be >= 0"),
        (dict(generator_width=0), "generator_width=0 must be >= 1"),
    ],
)
def test_invalid_knobs_name_field_value_and_allowed(knobs: dict, message: str) -> None:
    arguments = dict(num_heads=H, metric_rank=4, generator_depth=1, generator_width=8) | knobs
    num_heads = arguments.pop("num_heads")
    with pytest.raises(ValueError, match=message):
        DAMCHA(D, num_heads, **arguments)
