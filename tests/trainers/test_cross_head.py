"""The cross-head baselines: fused paths against their explicit references, causality,
their defining properties, and the fused kernel they run on."""

from __future__ import annotations

import pytest
import torch

from tests.trainers.test_attention import B, D, H, T, assert_fused_matches_reference, assert_ignores_future
from trainers.attention import (
    CROSS_HEAD_BASELINES,
    CollaborativeAttention,
    MixedRoleAttention,
    MixtureOfAttentionHeads,
    MultiHeadAttention,
    TalkingHeadsAttention,
    build_attention,
)
from trainers.attention.mixed_roles import role_mask
from trainers.measure import attention_kernels

KNOBS = {"dcmha": {"router_rank": 3}, "mma": {"local_window": 2}, "moa": {"expert_factor": 2}}


def _layer(name: str, *, causal: bool, perturb: bool = True) -> torch.nn.Module:
    torch.manual_seed(0)
    layer = build_attention(name, D, H, causal=causal, **KNOBS.get(name, {}))
    if perturb:  # leave the identity start of the head mixes, so that heads really talk
        with torch.no_grad():
            for parameter_name, p in layer.named_parameters():
                if "mix" in parameter_name:
                    p.add_(0.3 * torch.randn_like(p))
    return layer


@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("name", CROSS_HEAD_BASELINES)
def test_fused_matches_reference_outputs_and_gradients(name: str, causal: bool, padded: bool) -> None:
    assert_fused_matches_reference(_layer(name, causal=causal), padded)


@pytest.mark.parametrize("name", CROSS_HEAD_BASELINES)
def test_causal_output_ignores_future_tokens(name: str) -> None:
    assert_ignores_future(_layer(name, causal=True))


@pytest.mark.parametrize("layer", [TalkingHeadsAttention, CollaborativeAttention], ids=["tha", "colmha"])
def test_new_talking_heads_and_collaborative_layers_are_mha(layer: type) -> None:
    mha = MultiHeadAttention(D, H)
    attn = layer(D, H)
    with torch.no_grad():  # the same projections: collaborative's shared ones are MHA's query and key
        q, k, v = mha.qkv_proj.weight.chunk(3)
        if isinstance(attn, CollaborativeAttention):
            attn.shared_query.weight.copy_(q)
            attn.shared_key.weight.copy_(k)
            attn.value_proj.load_state_dict({"weight": v, "bias": mha.qkv_proj.bias.chunk(3)[2]})
            mha.qkv_proj.bias[: 2 * D].zero_()  # collaborative's shared projections have no bias
        else:
            attn.qkv_proj.load_state_dict(mha.qkv_proj.state_dict())
        attn.out_proj.load_state_dict(mha.out_proj.state_dict())
    x = torch.randn(B, T, D)
    torch.testing.assert_close(attn(x), mha(x), atol=1e-5, rtol=1e-5)


def test_talking_heads_post_mix_lets_a_head_use_another_heads_weights() -> None:
    """P' = a permutation: head h's output is head h+1's weights over head h's values."""
    attn = _layer("tha", causal=False, perturb=False)
    with torch.no_grad():
        attn.weight_mix.copy_(torch.eye(H).roll(1, dims=1))
    mha = MultiHeadAttention(D, H)
    mha.load_state_dict(attn.state_dict(), strict=False)
    x = torch.randn(B, T, D)
    assert not torch.allclose(attn(x), mha(x), atol=1e-4)
    torch.testing.assert_close(attn(x), attn.explicit(x), atol=1e-5, rtol=1e-4)


def test_mixed_roles_see_their_positions() -> None:
    window = 2
    bidirectional = {
        role: role_mask(role, 5, window=window, causal=False, device="cpu") for role in ("global", "local", "forward", "backward")
    }
    assert bidirectional["global"].all()
    assert bidirectional["local"][2].tolist() == [False, True, True, True, False]
    assert bidirectional["forward"][2].tolist() == [True, True, True, False, False]
    assert bidirectional["backward"][2].tolist() == [False, False, True, True, True]
    for role in ("global", "local", "forward", "backward"):  # causal: every role looks at the past only
        causal = role_mask(role, 5, window=window, causal=True, device="cpu")
        assert not causal.triu(diagonal=1).any() and causal.diagonal().all()


def test_mixed_roles_with_fewer_heads_than_roles() -> None:
    attn = MixedRoleAttention(D, 2, local_window=2)
    x = torch.randn(B, T, D)
    torch.testing.assert_close(attn(x), attn.explicit(x), atol=1e-5, rtol=1e-4)


def test_each_token_uses_its_top_heads_experts_and_their_gates_sum_to_one() -> None:
    attn = MixtureOfAttentionHeads(D, H, expert_factor=2)
    gates = attn.gates(torch.randn(B, T, D))  # (B, T, E)
    assert gates.shape == (B, T, 2 * H)
    assert ((gates > 0).sum(dim=-1) == H).all()
    torch.testing.assert_close(gates.sum(dim=-1), torch.ones(B, T))


@pytest.mark.parametrize("name", CROSS_HEAD_BASELINES)
def test_fused_paths_run_the_fused_kernel_both_ways(name: str) -> None:
    attn = _layer(name, causal=False)
    x = torch.randn(B, T, D, requires_grad=True)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 5:] = False
    kernels = attention_kernels(lambda: attn(x, mask).sum().backward())
    assert {"flash_attention_for_cpu", "flash_attention_for_cpu_backward"} <= kernels


@pytest.mark.parametrize(
    ("name", "knobs", "message"),
    [
        ("dcmha", {"router_rank": 0}, "router_rank=0 must be an integer >= 1"),
        ("mma", {"local_window": "8"}, "local_window='8' must be an integer >= 1"),
        ("moa", {"expert_factor": 1.5}, "expert_factor=1.5 must be an integer >= 1"),
        ("tha", {}, "num_heads=3 must divide d_model=16"),
    ],
)
def test_invalid_knobs_name_the_knob_and_what_is_allowed(name: str, knobs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_attention(name, D, 3 if name == "tha" else H, **knobs)
