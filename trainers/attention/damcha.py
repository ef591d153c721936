"""DAMCHA: Data-Adaptive Mahalanobis Cross-Head Attention, fused.

Head h scores ``q_h(t)ᵀ [M(c) k(s)]_h / √d``: it compares its query with a mix of all
heads' keys. The mix is a per-sequence (or, causal, per-chunk) linear map of the keys, so
the mixed keys are computed once in O(T·D·r) and the unchanged fused SDPA kernel runs on
``(Q, K̃, V)``. With ``M = I`` this is exactly multi-head attention.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Literal

from torch import Tensor, nn

from trainers.attention.family import AttentionKnobs
from trainers.attention.metric import Metric, MetricGenerator, Rank, sequence_context
from trainers.attention.sdpa import check_heads, fused_attention, merge_heads, split_heads
from trainers.knob_declarations import knob

MetricForm = Literal["bilinear", "mahalanobis"]
MetricMode = Literal["cross", "rowsum"]
METRIC_FORMS: tuple[str, ...] = ("bilinear", "mahalanobis")
METRIC_MODES: tuple[str, ...] = ("cross", "rowsum")
# Causal layers generate one metric per this many positions: at 64, the generator's work and
# the tensors kept for backward are 1/64 of one metric per position (measured in
# ``benchmarks.attention --causal``), and a position's metric lags its context by < 64 tokens.
DEFAULT_METRIC_CHUNK = 64


SHARINGS: tuple[str, ...] = ("layer", "group:2", "group:3", "group:4", "stack")


def parse_sharing(sharing: str, num_layers: int) -> int:
    """Layers per generator for a sharing granularity.

    Args:
        sharing: ``"layer"``, ``"group:K"`` or ``"stack"``.
        num_layers: Layers in the stack.

    Returns:
        K: consecutive layers that share one generator (1 for ``layer``, all for ``stack``).

    Raises:
        ValueError: an unknown granularity, or K outside 1..num_layers.
    """
    if sharing == "layer":
        return 1
    if sharing == "stack":
        return num_layers
    prefix, _, size = str(sharing).partition(":")
    if prefix == "group" and size.isdigit() and 1 <= int(size) <= num_layers:
        return int(size)
    raise ValueError(
        f"sharing={sharing!r} is not allowed; allowed: 'layer', 'stack' or 'group:K' with 1 <= K <= num_layers={num_layers}"
    )


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class DAMCHAKnobs(AttentionKnobs):
    """DAMCHA's knobs, declared once: the layer's keyword arguments and the model's ``sharing``.

    Every knob's domain here is the widest a study may search; ``check`` says which values
    train. See ``DAMCHA`` for what each does.
    """

    metric_rank: Rank = knob(16, choices=(1, 2, 4, 8, 16, 32, 64, "full"), help="rank r of the generated metric (U V^T)")
    metric_form: MetricForm = knob("bilinear", choices=METRIC_FORMS, help="how the metric enters the scores")
    metric_mode: MetricMode = knob("cross", choices=METRIC_MODES, help="cross-head metric or the authors' rowsum mode")
    generator_depth: int = knob(1, choices=(0, 1, 2, 3), help="hidden layers of the metric generator (0 = static metric)")
    generator_width: int | tuple[int, ...] = knob(
        64, choices=(16, 32, 64, 128, 256), help="hidden width of the metric generator (a tuple: one per hidden layer)"
    )
    metric_chunk: int = knob(
        DEFAULT_METRIC_CHUNK,
        choices=(1, 4, 8, 16, 64, 256),
        help="causal models: positions per generated metric (1 = one per position)",
    )
    sharing: str = knob("layer", choices=SHARINGS, help="consecutive layers sharing one generator", layer_argument=False)

    def check(self, *, d_model: int, num_heads: int, num_layers: int | None = None) -> None:
        """Check the knobs together and against the model's shape.

        Args:
            d_model: Model width.
            num_heads: Head count.
            num_layers: Layers in the stack (None: a lone layer; ``sharing`` is not checked).

        Raises:
            ValueError: naming the knob, its value and what is allowed.
        """
        check_heads(d_model, num_heads)
        rank = self.metric_rank
        if rank != "full" and (isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= d_model):
            raise ValueError(
                f"metric_rank={rank!r} must be an integer in 1..d_model={d_model} or 'full' "
                "(rank 0 is multi-head attention: use attention='mha')"
            )
        if self.metric_form not in METRIC_FORMS:
            raise ValueError(f"metric_form={self.metric_form!r} is not allowed; allowed: {', '.join(METRIC_FORMS)}")
        if self.metric_mode not in METRIC_MODES:
            raise ValueError(f"metric_mode={self.metric_mode!r} is not allowed; allowed: {', '.join(METRIC_MODES)}")
        if self.metric_mode == "rowsum" and self.metric_form != "bilinear":
            raise ValueError(
                f"metric_form={self.metric_form!r} is not allowed with metric_mode='rowsum' "
                "(the authors' reference mode has no Mahalanobis form); allowed: bilinear"
            )
        for name, low, meaning in (
            ("generator_depth", 0, "0 = static metric"),
            ("metric_chunk", 1, "1 = one metric per position"),
        ):
            value = getattr(self, name)
            if not _is_integer(value) or value < low:
                raise ValueError(f"{name}={value!r} must be an integer >= {low} ({meaning})")
        widths = self.generator_width if isinstance(self.generator_width, tuple | list) else (self.generator_width,)
        if not widths or not all(_is_integer(w) and w >= 1 for w in widths):
            raise ValueError(
                f"generator_width={self.generator_width!r} must be an integer >= 1 (its hidden width), "
                "or a tuple of them, one per hidden layer"
            )
        if isinstance(self.generator_width, tuple | list) and len(widths) != self.generator_depth:
            raise ValueError(
                f"generator_width={self.generator_width!r} gives {len(widths)} hidden widths for "
                f"generator_depth={self.generator_depth} hidden layers; give one per layer, or one integer for all"
            )
        if num_layers is not None:
            parse_sharing(self.sharing, num_layers)

    def layer_flops(self, *, length: int, d_model: int, num_heads: int) -> tuple[int, int]:
        """The layer's projections (``rowsum``: values and output only) and the folding of the
        metric into queries and keys; MHA's core. The generator's FLOPs are the model's
        (``trainers.costs``): layers may share it."""
        d = d_model
        if self.metric_mode == "rowsum":
            per_token = d * (d // num_heads) if self.metric_rank == "full" else 2 * d * self.metric_rank
            dense = 4 * length * d * d + 2 * length * per_token
        else:
            per_side = d * d if self.metric_rank == "full" else 2 * d * self.metric_rank
            sides = 2 if self.metric_form == "mahalanobis" else 1
            dense = 8 * length * d * d + 2 * length * per_side * sides
        return dense, 4 * length * length * d

    def hidden_widths(self) -> tuple[int, ...]:
        """The generator's hidden layers' widths, first to last (empty for a static metric)."""
        if isinstance(self.generator_width, tuple | list):
            return tuple(self.generator_width)
        return (self.generator_width,) * self.generator_depth


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
        generator_width: Hidden width of the generator MLP, or a tuple of widths, one per
            hidden layer (the authors' generator: ``generator_depth=2``, ``(256, 512)``).
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
        ValueError: an invalid knob (see ``DAMCHAKnobs.check``).
    """

    Knobs: ClassVar[type[DAMCHAKnobs]] = DAMCHAKnobs

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        metric_rank: Rank,
        metric_form: MetricForm = "bilinear",
        metric_mode: MetricMode = "cross",
        generator_depth: int,
        generator_width: int | tuple[int, ...],
        causal: bool = False,
        dropout: float = 0.0,
        metric_chunk: int = DEFAULT_METRIC_CHUNK,
        own_generator: bool = True,
    ) -> None:
        super().__init__()
        self.knobs = DAMCHAKnobs(
            metric_rank=metric_rank,
            metric_form=metric_form,
            metric_mode=metric_mode,
            generator_depth=generator_depth,
            generator_width=generator_width,
            metric_chunk=metric_chunk,
        )
        self.knobs.check(d_model=d_model, num_heads=num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
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
                widths=self.knobs.hidden_widths(),
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
        chunk = self.knobs.metric_chunk if self.causal and self.knobs.generator_depth > 0 else None
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
        if self.knobs.metric_mode == "rowsum":
            q = metric.row_sum_queries(x, self.num_heads).transpose(1, 2)  # (B, H, T, d)
            return q, split_heads(x, self.num_heads), split_heads(self.v_proj(x), self.num_heads)
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)  # (B, T, D) each
        if self.knobs.metric_form == "bilinear":
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
