"""The model configuration: one frozen dataclass whose fields are the knob names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, Literal

from trainers.attention import ATTENTION, DAMCHA, DEFAULT_METRIC_CHUNK, validate_damcha_knobs
from trainers.attention.metric import Rank

ARCHITECTURES: tuple[str, ...] = ("encoder", "pair", "decoder")
POOLINGS: tuple[str, ...] = ("cls", "mean")


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
    prefix, _, size = sharing.partition(":")
    if prefix == "group" and size.isdigit() and 1 <= int(size) <= num_layers:
        return int(size)
    raise ValueError(
        f"sharing={sharing!r} is not allowed; allowed: 'layer', 'stack' or 'group:K' with 1 <= K <= num_layers={num_layers}"
    )


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to build a model; field names are the search-space knob names.

    DAMCHA knobs (``metric_*``, ``generator_*``, ``sharing``) are ignored when
    ``attention == "mha"``.

    Attributes:
        vocab_size: Token vocabulary size (padding id 0 included).
        num_classes: Output classes (classifiers); ignored by the decoder.
        max_length: Longest input sequence.
        architecture: ``encoder`` (classifier), ``pair`` (two-tower classifier, LRA
            Retrieval) or ``decoder`` (causal language model).
        d_model: Model width D.
        num_layers: Transformer blocks.
        num_heads: Attention heads H; must divide ``d_model``.
        mlp_width: Hidden width of each block's MLP.
        dropout: Dropout on residual branches and attention weights.
        pooling: ``cls`` (a learned CLS token) or ``mean`` (masked mean); classifiers only.
        attention: ``mha`` or ``damcha``.
        metric_rank, metric_form, metric_mode, generator_depth, generator_width,
            metric_chunk: see ``trainers.attention.DAMCHA`` (``metric_chunk`` acts in the
            decoder only: positions per generated metric).
        sharing: ``layer``, ``group:K`` or ``stack``: how many consecutive layers share
            one metric generator, run once on the first of them.
    """

    vocab_size: int
    num_classes: int
    max_length: int
    architecture: Literal["encoder", "pair", "decoder"] = "encoder"
    d_model: int = 128
    num_layers: int = 2
    num_heads: int = 4
    mlp_width: int = 256
    dropout: float = 0.0
    pooling: Literal["cls", "mean"] = "cls"
    attention: str = "mha"
    metric_rank: Rank = 16
    metric_form: str = "bilinear"
    metric_mode: str = "cross"
    generator_depth: int = 1
    generator_width: int = 64
    metric_chunk: int = DEFAULT_METRIC_CHUNK
    sharing: str = "layer"

    def __post_init__(self) -> None:
        for name, low in (("vocab_size", 2), ("max_length", 1), ("d_model", 1), ("num_layers", 1), ("mlp_width", 1)):
            if getattr(self, name) < low:
                raise ValueError(f"{name}={getattr(self, name)} must be >= {low}")
        if self.architecture != "decoder" and self.num_classes < 2:
            raise ValueError(f"num_classes={self.num_classes} must be >= 2 for a classifier")
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture={self.architecture!r} is not allowed; allowed: {', '.join(ARCHITECTURES)}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling={self.pooling!r} is not allowed; allowed: {', '.join(POOLINGS)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout={self.dropout} must be in [0, 1)")
        if self.attention not in ATTENTION:
            raise ValueError(f"attention={self.attention!r} is not allowed; allowed: {', '.join(ATTENTION)}")
        if self.num_heads < 1 or self.d_model % self.num_heads:
            raise ValueError(f"num_heads={self.num_heads} must divide d_model={self.d_model}")
        if self.is_damcha:
            validate_damcha_knobs(
                d_model=self.d_model,
                num_heads=self.num_heads,
                metric_rank=self.metric_rank,
                metric_form=self.metric_form,
                metric_mode=self.metric_mode,
                generator_depth=self.generator_depth,
                generator_width=self.generator_width,
                metric_chunk=self.metric_chunk,
            )
            parse_sharing(self.sharing, self.num_layers)

    @property
    def is_damcha(self) -> bool:
        """Whether the attention is a DAMCHA variant (fused or explicit), which takes the DAMCHA knobs."""
        return issubclass(ATTENTION[self.attention], DAMCHA)

    @property
    def causal(self) -> bool:
        """Whether attention is causal (the decoder)."""
        return self.architecture == "decoder"

    @property
    def layers_per_generator(self) -> int:
        """Consecutive layers sharing one DAMCHA generator."""
        return parse_sharing(self.sharing, self.num_layers)

    @classmethod
    def completed(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """Every field's value: the given ones, the defaults for the rest (not validated).

        A record of a run keeps this, so that it re-runs the same model after a default
        changes.
        """
        defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
        return defaults | dict(values)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """Build from a flat dict of knobs, rejecting unknown names.

        Raises:
            ValueError: a key that is not a field (named, with the allowed fields).
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown model knob(s) {unknown}; allowed: {', '.join(sorted(known))}")
        return cls(**values)
