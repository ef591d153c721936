"""DAMCHA: Data-Adaptive Mahalanobis Cross-Head Attention, fused.

Head h scores ``q_h(t)ᵀ [M(c) k(s)]_h / √d``: it compares its query with a mix of all
heads' keys. The mix is a per-sequence (or, causal, per-chunk) linear map of the keys, so
the mixed keys are computed once in O(T·D·r) and the unchanged fused SDPA kernel runs on
``(Q, K̃, V)``. With ``M = I`` this is exactly multi-head attention.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from torch import Tensor, nn

from trainers.attention.metric import Metric, MetricGenerator, Rank, sequence_context
from trainers.attention.sdpa import fused_attention, merge_heads, split_heads

MetricForm = Literal["bilinear", "mahalanobis"]
MetricMode = Literal["cross", "rowsum"]
METRIC_FORMS: tuple[str, ...] = ("bilinear", "mahalanobis")
METRIC_MODES: tuple[str, ...] = ("cross", "rowsum")
# Causal layers generate one metric per this many positions: at 64, the generator's work and
# the tensors kept for backward are 1/64 of one metric per position (measured in
# ``benchmarks.attention --causal``), and a position's metric lags its context by < 64 tokens.
DEFAULT_METRIC_CHUNK = 64


def validate_damcha_knobs(
    *,
    d_model: int,
    num_heads: int,
    metric_rank: Rank,
    metric_form: str,
    metric_mode: str,
    generator_depth: int,
    generator_width: int,
    metric_chunk: int = 1,
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
    if isinstance(metric_chunk, bool) or not isinstance(metric_chunk, int) or metric_chunk < 1:
        raise ValueError(f"metric_chunk={metric_chunk!r} must be an integer >= 1 (1 = one metric per position)")


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
        causal: Causal self-attention (prefix-mean contexts, a metric per chunk of
            positions). The bilinear metric is applied per key, ``M(c_s)``; the
            Mahalanobis form applies ``L(c_t)`` to the query and ``L(c_s)`` to the key, so
            its score is ``q(t)ᵀ L(c_t) L(c_s)ᵀ k(s)``: PSD only where the two contexts
            agree; the rowsum mode applies ``m_h(c_t)`` per query.
        metric_chunk: Causal layers with an input-dependent generator only: positions per
            metric. Chunk i (positions i·C .. i·C+C-1) uses the metric generated from the
            prefix mean of positions ≤ i·C, so nothing from the future is read; 1 = one
            metric per position. Ignored otherwise (one metric per sequence).
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
        metric_chunk: int = DEFAULT_METRIC_CHUNK,
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
            metric_chunk=metric_chunk,
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
        self.metric_chunk = metric_chunk
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
                row_sum_heads=num_heads if metric_mode == "rowsum" else None,
            )
            if own_generator
            else None
        )

    def generate_metric(self, x: Tensor, padding_mask: Tensor | None = None, *, dense: bool = False) -> Metric:
        """Run this layer's generator on ``x`` (a model may pass the result to other layers).

        Args:
            x: (B, T, D) generator input.
            padding_mask: (B, T) bool, True = real token.
            dense: Generate every entry of a full-rank metric, also where the rowsum
                mode needs only its row sums (for the explicit reference).

        Returns:
            The metric for this batch: one per sequence, or one per chunk of
            ``metric_chunk`` positions in a causal layer with an input-dependent generator
            (a static metric ignores its input, so one per sequence is enough).

        Raises:
            RuntimeError: the layer was built without a generator.
        """
        if self.generator is None:
            raise RuntimeError("this DAMCHA layer has no generator: pass the shared metric to forward()")
        chunk = self.metric_chunk if self.causal and self.generator_depth > 0 else None
        metric = self.generator(sequence_context(x, padding_mask, chunk=chunk), dense=dense)
        return replace(metric, chunk=chunk)

    def heads(self, x: Tensor, metric: Metric) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values with the metric folded in, ready for SDPA.

        Args:
            x: (B, T, D).
            metric: The metric for this batch.

        Returns:
            q, k, v, each (B, H, T, d).
        """
        if self.metric_mode == "rowsum":
            q = metric.row_sum_queries(x, self.num_heads).transpose(1, 2)  # (B, H, T, d)
            return q, split_heads(x, self.num_heads), split_heads(self.v_proj(x), self.num_heads)
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
