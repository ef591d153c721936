"""Explicit-softmax reference implementations: the oracle for the fused paths.

They use a layer's own weights and generated metric, but form the metric as explicit
D×D matrices and materialise the (B, H, T, T) scores, the way the formulas read (and
the way the authors' released code computes them). Slow and memory-hungry on purpose.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from trainers.attention.damcha import DAMCHA
from trainers.attention.metric import Metric
from trainers.attention.sdpa import explicit_attention, merge_heads, split_heads


def _heads(x: Tensor, num_heads: int) -> Tensor:
    """(B, T, D) -> (B, T, H, d)."""
    batch, length, width = x.shape
    return x.view(batch, length, num_heads, width // num_heads)


def _damcha_scores(attn: DAMCHA, x: Tensor, metric: Metric) -> tuple[Tensor, Tensor]:
    """Unscaled scores (B, H, T, T) and values (B, H, T, d) of a DAMCHA layer."""
    heads, d = attn.num_heads, attn.d_model // attn.num_heads
    metric = metric.at_positions(x.shape[1])  # a chunked metric, spelled out per position
    per_position = metric.chunk is not None
    if attn.knobs.metric_mode == "rowsum":
        if metric.row_sums is not None:
            row_sums = metric.row_sums  # (B, [T,] H, d, d)
        else:
            m = metric.matrix(plus_identity=False)  # (B, [T,] D, D)
            blocks = m.view(*m.shape[:-2], heads, d, heads, d)
            row_sums = sum(blocks[..., :, :, j, :] for j in range(heads))  # m_h = Σ_j M_hj: (B, [T,] H, d, d)
        xh = _heads(x, heads)  # (B, T, H, d)
        pattern = "bthi,bthij->bthj" if per_position else "bthi,bhij->bthj"
        queries = torch.einsum(pattern, xh, row_sums)  # X_h(t) m_h(c_t): (B, T, H, d)
        v = split_heads(attn.v_proj(x), heads)
        return torch.einsum("bthj,bshj->bhts", queries, xh), v
    q, k, v = attn.qkv_proj(x).chunk(3, dim=-1)
    qh, kh = _heads(q, heads), _heads(k, heads)
    if attn.knobs.metric_form == "bilinear":
        m = metric.matrix(plus_identity=True)  # (B, [S,] D, D), keyed by key position s
        blocks = m.view(*m.shape[:-2], heads, d, heads, d)  # M_hj blocks
        # score_h(t, s) = q_h(t)ᵀ Σ_j M_hj k_j(s), the mixed keys first (each from its own matrix)
        pattern = "bshijc,bsjc->bshi" if per_position else "bhijc,bsjc->bshi"
        mixed_keys = torch.einsum(pattern, blocks, kh)  # (B, S, H, d)
        return torch.einsum("bthi,bshi->bhts", qh, mixed_keys), split_heads(v, heads)
    lower = metric.matrix(plus_identity=True)  # L: (B, [T,] D, D)
    columns = lower.view(*lower.shape[:-1], heads, d)  # L_h = columns of head h
    if per_position:
        # score_h(t, s) = q(t)ᵀ L(c_t) P_h L(c_s)ᵀ k(s)
        q_mixed = torch.einsum("bti,btihc->bthc", q, columns)
        k_mixed = torch.einsum("bsi,bsihc->bshc", k, columns)
        return torch.einsum("bthc,bshc->bhts", q_mixed, k_mixed), split_heads(v, heads)
    per_head = torch.einsum("bihc,bjhc->bhij", columns, columns)  # M_h = L_h L_hᵀ (PSD): (B, H, D, D)
    return torch.einsum("bti,bhij,bsj->bhts", q, per_head, k), split_heads(v, heads)


def reference_attention(
    attn: nn.Module,
    x: Tensor,
    padding_mask: Tensor | None = None,
    metric: Metric | None = None,
) -> Tensor:
    """Explicit-softmax forward of an attention layer, with its weights.

    Args:
        attn: A layer of ``trainers.attention.ATTENTION`` (dropout is not applied).
        x: (B, T, D).
        padding_mask: (B, T) bool, True = real token.
        metric: For DAMCHA, a precomputed metric; generated from ``x`` when None (a
            per-chunk metric is applied position by position, from dense matrices).

    Returns:
        (B, T, D), equal to ``attn(x, padding_mask)`` up to rounding.

    Raises:
        TypeError: ``attn`` is not an attention layer of this package.
    """
    if not isinstance(attn, DAMCHA):
        if not hasattr(attn, "explicit"):
            raise TypeError(f"no reference implementation for {type(attn).__name__}")
        return attn.explicit(x, padding_mask)  # each other family states its own
    if metric is None:  # every entry of a full-rank metric: the fused rowsum path sums weights first
        metric = attn.generate_metric(x, padding_mask, dense=True)
    scores, v = _damcha_scores(attn, x, metric)
    head_width = attn.d_model // attn.num_heads
    out = explicit_attention(scores / math.sqrt(head_width), v, padding_mask, causal=attn.causal)
    return attn.out_proj(merge_heads(out))


class ExplicitDAMCHA(DAMCHA):
    """DAMCHA computed the straightforward way, as the authors' code does: per-sequence D×D
    metric and materialised (B, H, T, T) scores. The same function as ``DAMCHA``, at its
    memory and time cost; a baseline for benchmarks, registered as ``damcha_explicit``."""

    def forward(self, x: Tensor, padding_mask: Tensor | None = None, metric: Metric | None = None) -> Tensor:
        """Attend through ``reference_attention`` (dropout is not applied)."""
        return reference_attention(self, x, padding_mask, metric)
