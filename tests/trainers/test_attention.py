"""Fused attention against its explicit reference, and DAMCHA's defining properties."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
import torch

from common.naming import UnknownNameError
from trainers.attention import DAMCHA, Metric, MultiHeadAttention, build_attention, reference_attention, sequence_context

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
    assert_fused_matches_reference(attn, padded)


def assert_fused_matches_reference(attn: torch.nn.Module, padded: bool) -> None:
    """The layer's fused forward equals its explicit reference, outputs and gradients (real tokens)."""
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
    assert_ignores_future(MultiHeadAttention(D, H, causal=True) if variant is None else _damcha(variant, causal=True))


def assert_ignores_future(attn: torch.nn.Module) -> None:
    """Changing the tokens after a position leaves the outputs up to it alone, and changes later ones."""
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
    with pytest.raises(
        UnknownNameError,
        match=r"did you mean 'damcha', 'dcmha'\? available: colmha, damcha, damcha_explicit, dcmha, mha, mma, moa, tha",
    ):
        build_attention("damch", D, H)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        (dict(num_heads=3), "num_heads=3 must divide d_model=16"),
        (dict(metric_rank=0), r"metric_rank=0 must be an integer in 1..d_model=16 .*attention='mha'"),
        (dict(metric_rank=17), "metric_rank=17 must be an integer in 1..d_model=16"),
        (dict(metric_rank="low"), "metric_rank='low' must be an integer"),
        (dict(metric_form="cosine"), "metric_form='cosine' is not allowed; allowed: bilinear, mahalanobis"),
        (dict(metric_mode="rows"), "metric_mode='rows' is not allowed; allowed: cross, rowsum"),
        (dict(metric_mode="rowsum", metric_form="mahalanobis"), "not allowed with metric_mode='rowsum'"),
        (dict(generator_depth=-1), "generator_depth=-1 must be an integer >= 0"),
        (dict(generator_width=0), "generator_width=0 must be an integer >= 1"),
        (dict(generator_width=(8, 0)), r"generator_width=\(8, 0\) must be an integer >= 1 .* or a tuple of them"),
        (dict(generator_width=(8, 16)), r"gives 2 hidden widths for generator_depth=1 hidden layers"),
        (dict(metric_chunk=0), r"metric_chunk=0 must be an integer >= 1 \(1 = one metric per position\)"),
        (dict(metric_chunk=2.0), "metric_chunk=2.0 must be an integer >= 1"),
    ],
)
def test_invalid_knobs_name_field_value_and_allowed(knobs: dict, message: str) -> None:
    arguments = dict(num_heads=H, metric_rank=4, generator_depth=1, generator_width=8) | knobs
    num_heads = arguments.pop("num_heads")
    with pytest.raises(ValueError, match=message):
        DAMCHA(D, num_heads, **arguments)


CHUNKS = [1, 3, 4, 16]  # one per position; dividing T=9 or not; longer than the sequence


def _chunked(variant: dict, chunk: int) -> DAMCHA:
    attn = _damcha(variant, causal=True)
    attn.knobs = replace(attn.knobs, metric_chunk=chunk)
    return attn


@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("variant", VARIANTS, ids=map(_ids, VARIANTS))
def test_chunked_causal_metric_matches_reference(variant: dict, chunk: int, padded: bool) -> None:
    assert_fused_matches_reference(_chunked(variant, chunk), padded)


@pytest.mark.parametrize("variant", VARIANTS, ids=map(_ids, VARIANTS))
def test_chunk_of_one_is_one_metric_per_position_from_its_prefix_mean(variant: dict) -> None:
    """metric_chunk=1 computes what a metric per position computes: position t's metric is
    generated from the mean of the real tokens at positions <= t."""
    attn = _chunked(variant, 1)
    x, mask = _inputs(padded=True)
    weights = mask.unsqueeze(-1).float()
    prefix_means = (x * weights).cumsum(dim=1) / weights.cumsum(dim=1).clamp(min=1.0)  # (B, T, D)
    per_position = attn.generator(prefix_means, dense=True)
    if variant["generator_depth"] > 0:
        per_position = Metric(per_position.u, per_position.v, per_position.full, chunk=1)

    expected = reference_attention(attn, x, mask, metric=per_position)
    torch.testing.assert_close(attn(x, mask)[mask], expected[mask], atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("chunk", CHUNKS)
def test_chunk_metric_comes_from_the_prefix_up_to_its_first_position(chunk: int) -> None:
    x, mask = _inputs(padded=True)
    contexts = sequence_context(x, mask, chunk=chunk)
    starts = range(0, T, chunk)
    assert contexts.shape == (B, len(starts), D)
    for i, start in enumerate(starts):
        real = mask[:, : start + 1].unsqueeze(-1).float()  # (B, start+1, 1)
        want = (x[:, : start + 1] * real).sum(dim=1) / real.sum(dim=1).clamp(min=1.0)
        torch.testing.assert_close(contexts[:, i], want)


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("variant", VARIANTS, ids=map(_ids, VARIANTS))
def test_chunked_output_ignores_every_later_token(variant: dict, chunk: int) -> None:
    attn = _chunked(variant, chunk)
    x = torch.randn(B, T, D)
    out = attn(x)
    for cut in range(T - 1):  # change every token after `cut`
        changed = x.clone()
        changed[:, cut + 1 :] = torch.randn(B, T - cut - 1, D)
        torch.testing.assert_close(attn(changed)[:, : cut + 1], out[:, : cut + 1])


def test_full_rank_rowsum_generates_only_the_row_sums() -> None:
    """The reference mode at full rank emits H·d² values, not D², and they are the row sums of W."""
    attn = DAMCHA(D, H, metric_rank="full", metric_mode="rowsum", generator_depth=2, generator_width=8)
    assert attn.generator.output.out_features == D * D  # the parameters are W's, as in the authors' layer
    x, _ = _inputs(padded=False)
    summed = attn.generate_metric(x)
    dense = attn.generate_metric(x, dense=True)
    d = D // H
    assert summed.full is None and summed.row_sums.shape == (B, H, d, d)
    torch.testing.assert_close(summed.row_sums, dense.full.view(B, H, d, H, d).sum(dim=3), atol=1e-5, rtol=1e-5)


def test_a_tuple_of_generator_widths_sizes_each_hidden_layer() -> None:
    attn = DAMCHA(D, H, metric_rank="full", metric_mode="rowsum", generator_depth=2, generator_width=(8, 24))
    linears = [m for m in attn.generator.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(D, 8), (8, 24), (24, D * D)]
    assert (
        attn.knobs.hidden_widths() == (8, 24) and DAMCHA.Knobs(generator_depth=3, generator_width=4).hidden_widths() == (4,) * 3
    )
