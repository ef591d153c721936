"""Mixing heads' logits before the softmax, on the fused kernel.

A mix of the heads' logits is a mix on the query side:

    Σ_j P_hj q_j(t)·k_j(s) = [P_h1 q_1(t), …, P_hH q_H(t)] · [k_1(s), …, k_H(s)]

so head h runs SDPA with head width D on its mixed query ``Q̃_h`` against all heads' keys
``K``, scaled by the head width d's 1/√d; a per-query mix ``P(t)`` folds into ``Q̃`` as
well. The values are all heads' too (``[V_1 … V_H]``, width D): SDPA gives ``A_h V_j``
for every pair (h, j), which a mix after the softmax (Talking-Heads) or the diagonal
(DCMHA) reads. No T×T tensor is kept; the core costs H× MHA's.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from trainers.attention.sdpa import fused_attention


def mixed_queries(q: Tensor, mix: Tensor) -> Tensor:
    """The query side of a pre-softmax head mix.

    Args:
        q: (B, T, D) all heads' queries.
        mix: (H, H) a static mix, or (B, T, H, H) one per query; ``mix[..., h, j]`` is the
            weight of source head j's logits in head h's.

    Returns:
        (B, H, T, D): head h's mixed query ``[P_h1 q_1(t), …, P_hH q_H(t)]``.
    """
    batch, length, width = q.shape
    heads = mix.shape[-1]
    per_head = q.view(batch, length, 1, heads, width // heads)  # (B, T, 1, H_src, d)
    mixed = per_head * mix.expand(batch, length, heads, heads)[..., None]  # (B, T, H, H_src, d)
    return mixed.reshape(batch, length, heads, width).transpose(1, 2)  # (B, H, T, D)


def attend_all_heads(
    q_mixed: Tensor, k: Tensor, v: Tensor, padding_mask: Tensor | None, *, causal: bool, dropout_p: float
) -> Tensor:
    """Each head's mixed query against all heads' keys, over all heads' values, fused.

    Args:
        q_mixed: (B, H, T, D) from ``mixed_queries``.
        k, v: (B, T, D) all heads' keys and values.
        padding_mask: (B, T) bool, True = real token, or None.
        causal: Causal masking.
        dropout_p: Attention dropout (on each head's weights ``A_h``).

    Returns:
        (B, H, T, H, d): entry ``[:, h, :, j]`` is ``A_h V_j``, head h's weights over head j's values.
    """
    batch, heads, length, width = q_mixed.shape
    keys = k[:, None].expand(batch, heads, length, width)  # (B, H, T, D), a view
    values = v[:, None].expand(batch, heads, length, width)  # (B, H, T, D), a view
    scale = 1 / math.sqrt(width // heads)  # the head width's, as each head's own logits are scaled
    out = fused_attention(q_mixed, keys, values, padding_mask, causal=causal, dropout_p=dropout_p, scale=scale)
    return out.view(batch, heads, length, heads, width // heads)  # (B, H, T, H, d)


def head_logits(q: Tensor, k: Tensor, num_heads: int) -> Tensor:
    """Each head's scaled logits, materialised (for the explicit references).

    Args:
        q, k: (B, T, D).
        num_heads: H.

    Returns:
        (B, H, T, T): ``q_h(t)·k_h(s) / √d``.
    """
    batch, length, width = q.shape
    qh = q.view(batch, length, num_heads, width // num_heads)  # (B, T, H, d)
    kh = k.view(batch, length, num_heads, width // num_heads)  # (B, S, H, d)
    return torch.einsum("bthc,bshc->bhts", qh, kh) / math.sqrt(width // num_heads)


def mix_heads(maps: Tensor, mix: Tensor) -> Tensor:
    """Mix materialised per-head maps (logits or weights) across heads.

    Args:
        maps: (B, H, T, T).
        mix: (H, H) static, or (B, T, H, H) per query; ``mix[..., h, j]`` weights head j in head h.

    Returns:
        (B, H, T, T): ``Σ_j mix_hj maps_j``.
    """
    if mix.dim() == 2:
        return torch.einsum("hj,bjts->bhts", mix, maps)
    return torch.einsum("bthj,bjts->bhts", mix, maps)
