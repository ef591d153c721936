"""DAMCHA: Data-Adaptive Mahalanobis Cross-Head Attention, fused.

Head h scores ``q_h(t)ᵀ [M(c) k(s)]_h / √d``: it compares its query with a mix of all
heads' keys. The mix is a per-sequence (or per-position) linear map of the keys, so the
mixed keys are computed once in O(T·D·r) and the unchanged fused SDPA kernel runs on
``(Q, K̃, V)``. With ``M = I`` this is exactly multi-head attention.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from trainers.attention.metric import Metric, MetricGenerator, Rank, sequence_context
from trainers.attention.sdpa import fused_attention, merge_heads, split_heads

MetricForm = Literal["bilinear", "mahalanobis"]
MetricMode = Literal["cross", "rowsum"]
METRIC_FORMS: tuple[str, ...] = ("bilinear", "mahalanobis")
METRIC_MODES: tuple[str, ...] = ("cross", "rowsum")


def validate_damcha_knobs(
    *,
    d_model: int,
    num_heads: int,
    metric_rank: Rank,
    metric_form: str,
    metric_mode: str,
    generator_depth: int,
    generator_width: int,
) -> None:
    """Check DAMCHA's knobs together.

    Raises:
        ValueError: naming the knob, its value and what is allowed.
    """
    if num_heads < 1 or d_model % num_heads:
        divisors = [h for h in range(1, d_model + 1) if d_model % h == 0]
        raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}; allowed: {divisors}")
    if metric_rank != "full" and (isinstance(metric_rank, bool) or not isinstance(metric_rank, int)):
        raise ValueError(f"metric_rank={metric_rank!r} must be an integer in 1..d_model={d_model} or 'full'")
    if metric_rank != "full" and not 1 <= metric_rank <= d_model:
        raise ValueError(
            f"metric_rank={metric_rank} must be in 1..d_model={d_model} or 'full' "
            "(rank 0 is multi-head attention: use attention='mha')"
        )
    if metric_form not in METRIC_FORMS:
        raise ValueError(f"metric_form={metric_form!r} is not allowed; allowed: {', '.join(METRIC_FORMS)}")
    if metric_mode not in METRIC_MODES:
        raise ValueError(f"metric_mode={metric_mode!r} is not allowed; allowed: {', '.join(METRIC_MODES)}")
    if metric_mode == "rowsum" and metric_form != "bilinear":
        raise ValueError(
            f"metric_form={metric_form!r} is not allowed with metric_mode='rowsum' "
            "(the authors' reference mode has no Mahalanobis form); allowed: bilinear"
        )
    if generator_depth < 0:
        raise ValueError(f"generator_depth={generator_depth} must be >= 0 (0 = static metric)")
    if generator_width < 1:
        raise ValueError(f"generator_width={generator_width} must be >= 1")


def rowsum_queries(x_heads: Tensor, metric: Metric, num_heads: int) -> Tensor:
    """Reference-mode queries ``Q̃_h = X_h m_h`` with ``m_h = Σ_j M_hj``.

    Low rank: ``m_h = U_h (Σ_j V_j)ᵀ / √r``, applied as two thin products so that no
    d×d matrix is formed per position.

    Args:
        x_heads: (B, H, T, d) raw input split into heads.
        metric: Generated metric (``M`` without identity).
        num_heads: H.

    Returns:
        (B, H, T, d).
    """
    batch, heads, length, d = x_heads.shape
    if metric.full is not None:
        if metric.per_position:
            blocks = metric.full.view(batch, length, heads, d, heads, d).sum(dim=4)  # (B, T, H, d, d)
            return torch.einsum("bhti,bthij->bhtj", x_heads, blocks)
        blocks = metric.full.view(batch, heads, d, heads, d).sum(dim=3)  # (B, H, d, d)
        return x_heads @ blocks
    rank = metric.u.shape[-1]
    scale = 1.0 / math.sqrt(rank)
    if metric.per_position:
        u = metric.u.view(batch, length, heads, d, rank)  # (B, T, H, d, r)
        v_sum = metric.v.view(batch, length, heads, d, rank).sum(dim=2)  # (B, T, d, r)
        coords = torch.einsum("bhti,bthir->bhtr", x_heads, u)  # (B, H, T, r)
        return scale * torch.einsum("bhtr,btjr->bhtj", coords, v_sum)
    u = metric.u.view(batch, heads, d, rank)  # (B, H, d, r)
    v_sum = metric.v.view(batch, heads, d, rank).sum(dim=1)  # (B, d, r)
    coords = x_heads @ u  # (B, H, T, r)
    return scale * (coords @ v_sum.unsqueeze(1).transpose(-1, -2))  # (B, H, T, d)


class DAMCHA(nn.Module):
    """Data-Adaptive Mahalanobis Cross-Head Attention through the fused SDPA kernel.

    Args:
        d_model: Model width D.
        num_heads: Head count H; must divide ``d_model``.
        metric_rank: Rank r of the generated part of ``M``, or ``"full"``.
        metric_form: ``"bilinear"`` (``M = I + U Vᵀ/√r`` on the keys) or ``"mahalanobis"``
            (``M = L Lᵀ`` with ``L = I + U Vᵀ/√r`` on queries and keys: PSD).
        metric_mode: ``"cross"`` (this mechanism) or ``"rowsum"`` (the authors' released
            code: no W_q/W_k, head h compares raw slices ``X_h`` under ``Σ_j M_hj``).
        generator_depth: Hidden layers of the generator MLP; 0 = static metric.
        generator_width: Hidden width of the generator MLP.
        causal: Causal self-attention (prefix-mean contexts, metric per position). The
            bilinear metric is applied per key, ``M(c_s)``; the Mahalanobis form applies
            ``L(c_t)`` to the query and ``L(c_s)`` to the key, so its score is
            ``q(t)ᵀ L(c_t) L(c_s)ᵀ k(s)``: PSD only where the two contexts agree.
        dropout: Attention dropout probability (training only).
        own_generator: Create a generator. Without one, ``forward`` needs a ``metric``
            (a model sharing one generator across layers passes it).

    Raises:
        ValueError: an invalid knob (see ``validate_damcha_knobs``).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        metric_rank: Rank,
        metric_form: MetricForm = "bilinear",
        metric_mode: MetricMode = "cross",
        generator_depth: int,
        generator_width: int,
        causal: bool = False,
        dropout: float = 0.0,
        own_generator: bool = True,
    ) -> None:
        super().__init__()
        validate_damcha_knobs(
            d_model=d_model,
            num_heads=num_heads,
            metric_rank=metric_rank,
            metric_form=metric_form,
            metric_mode=metric_mode,
            generator_depth=generator_depth,
            generator_width=generator_width,
        )
        self.d_model = d_model
        self.num_heads = num_heads
        self.metric_rank = metric_rank
        self.metric_form = metric_form
        self.metric_mode = metric_mode
        self.generator_depth = generator_depth
        self.generator_width = generator_width
        self.causal = causal
        self.dropout = dropout
        if metric_mode == "cross":
            self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        else:
            self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.generator = (
            MetricGenerator(
                d_model,
                rank=metric_rank,
                depth=generator_depth,
                width=generator_width,
                identity_start=metric_mode == "cross",
            )
            if own_generator
            else None
        )

    def generate_metric(self, x: Tensor, padding_mask: Tensor | None = None) -> Metric:
        """Run this layer's generator on ``x`` (a model may pass the result to other layers).

        Args:
            x: (B, T, D) generator input.
            padding_mask: (B, T) bool, True = real token.

        Returns:
            The metric for this batch.

        Raises:
            RuntimeError: the layer was built without a generator.
        """
        if self.generator is None:
            raise RuntimeError("this DAMCHA layer has no generator: pass the shared metric to forward()")
        # A static metric ignores its input: one per sequence is enough even when causal.
        per_position = self.causal and self.generator_depth > 0
        return self.generator(sequence_context(x, padding_mask, causal=per_position))

    def heads(self, x: Tensor, metric: Metric) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values with the metric folded in, ready for SDPA.

        Args:
            x: (B, T, D).
            metric: The metric for this batch.

        Returns:
            q, k, v, each (B, H, T, d).
        """
        if self.metric_mode == "rowsum":
            x_heads = split_heads(x, self.num_heads)  # (B, H, T, d)
            q = rowsum_queries(x_heads, metric, self.num_heads)
            return q, x_heads, split_heads(self.v_proj(x), self.num_heads)
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)  # (B, T, D) each
        if self.metric_form == "bilinear":
            k = metric.times_identity_plus(k, transposed=True)  # K̃ = K Mᵀ
        else:
            q = metric.times_identity_plus(q, transposed=False)  # Q̃ = Q L
            k = metric.times_identity_plus(k, transposed=False)  # K̃ = K L
        return tuple(split_heads(t, self.num_heads) for t in (q, k, v))

    def forward(self, x: Tensor, padding_mask: Tensor | None = None, metric: Metric | None = None) -> Tensor:
        """Attend.

        Args:
            x: (B, T, D).
            padding_mask: (B, T) bool, True = real token.
            metric: A precomputed (shared) metric; generated from ``x`` when None.

        Returns:
            (B, T, D).
        """
        if metric is None:
            metric = self.generate_metric(x, padding_mask)
        q, k, v = self.heads(x, metric)  # (B, H, T, d) each
        dropout_p = self.dropout if self.training else 0.0
        out = fused_attention(q, k, v, padding_mask, causal=self.causal, dropout_p=dropout_p)
        return self.out_proj(merge_heads(out))  # (B, T, D)
