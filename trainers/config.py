"""The model configuration: one frozen dataclass whose fields are the knob names.

Its knobs are its own (width, heads, depth) plus every attention family's, inherited
from the family's knobs dataclass (``DAMCHAKnobs``, ``DCMHAKnobs`` ...): a family
declares a knob once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, Literal

from common.naming import lookup
from trainers.attention import ATTENTION, CROSS_HEAD_BASELINES, DAMCHA, AttentionKnobs, parse_sharing
from trainers.knob_declarations import knob, knob_fields, knob_names

ARCHITECTURES: tuple[str, ...] = ("encoder", "pair", "decoder")
POOLINGS: tuple[str, ...] = ("cls", "mean")
NORMS: tuple[str, ...] = ("pre", "post")


# Every family's knobs dataclass once, in registry order: ModelConfig inherits their fields.
FAMILY_KNOBS: tuple[type[AttentionKnobs], ...] = tuple(dict.fromkeys(layer.Knobs for layer in ATTENTION.values()))


def _family_knobs(values: Mapping[str, Any]) -> AttentionKnobs:
    """The knobs dataclass of the family that ``values["attention"]`` names, from ``values``."""
    family = ATTENTION[values["attention"]].Knobs
    return family(**{f.name: values[f.name] for f in knob_fields(family)})


def _check_causal_pooling(classifier_causal: bool, architecture: str, pooling: str) -> None:
    """A causal classifier pools by the mean: its CLS token, placed first, would see only itself.

    Raises:
        ValueError: ``classifier_causal`` with ``pooling='cls'`` in a classifier.
    """
    if classifier_causal and architecture != "decoder" and pooling == "cls":
        raise ValueError(
            "classifier_causal=True needs pooling='mean': a causal classifier's CLS token, placed first, sees only itself"
        )


@dataclass(frozen=True, kw_only=True)
class ModelConfig(*reversed(FAMILY_KNOBS)):  # reversed: fields in registry order
    """Everything needed to build a model; field names are the search-space knob names.

    An attention family's knobs (DAMCHA's ``metric_*``, ``generator_*``, ``sharing``;
    ``router_rank``, ``local_window``, ``expert_factor``) are ignored when ``attention``
    names another family.

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
        classifier_causal: Causal attention in a classifier (the DAMCHA authors' text and
            image models are causal); it pools by ``mean``, since a CLS token placed first
            would see only itself. The decoder is always causal.
        embedding_std: Standard deviation of the token and position embeddings' initial
            weights; None: PyTorch's (1). A decoder's output layer shares the token
            embedding, so with 1 its first logits spread by √d_model (a loss near 16 nats
            at d=32, where uniform guessing costs log V ≈ 5.6); GPT-2 uses 0.02.
        norm: ``pre`` (LayerNorm before each sublayer, a final LayerNorm) or ``post``
            (LayerNorm after each residual sum, as the original Transformer and the
            DAMCHA authors' blocks).
        attention: ``mha``, ``damcha`` or a cross-head baseline (``trainers.attention``).
        metric_rank, metric_form, metric_mode, generator_depth, generator_width,
            metric_chunk, sharing: ``trainers.attention.DAMCHAKnobs``.
        router_rank, local_window, expert_factor: ``DCMHAKnobs``, ``MMAKnobs``, ``MoAKnobs``.
    """

    vocab_size: int
    num_classes: int
    max_length: int
    architecture: Literal["encoder", "pair", "decoder"] = "encoder"
    attention: str = knob("mha", choices=("mha", "damcha", *CROSS_HEAD_BASELINES), help="attention variant")
    num_heads: int = knob(4, choices=(1, 2, 4, 8, 16, 32), help="attention heads; must divide d_model")
    d_model: int = knob(128, choices=(32, 48, 64, 96, 128, 256, 512), help="model width D")
    num_layers: int = knob(2, low=1, high=12, help="transformer blocks")
    mlp_width: int = knob(256, choices=(64, 128, 256, 512, 1024, 2048), help="hidden width of each block's MLP")
    norm: Literal["pre", "post"] = knob("pre", choices=NORMS, help="LayerNorm before each sublayer or after its residual sum")
    dropout: float = 0.0
    pooling: Literal["cls", "mean"] = knob("cls", choices=POOLINGS, help="classifiers: a learned CLS token or the masked mean")
    classifier_causal: bool = knob(
        False, choices=(False, True), help="classifiers: each position attends only to itself and earlier ones"
    )
    embedding_std: float | None = None

    def __post_init__(self) -> None:
        for name, low in (("vocab_size", 2), ("max_length", 1), ("d_model", 1), ("num_layers", 1), ("mlp_width", 1)):
            if getattr(self, name) < low:
                raise ValueError(f"{name}={getattr(self, name)} must be >= {low}")
        if self.architecture != "decoder" and self.num_classes < 2:
            raise ValueError(f"num_classes={self.num_classes} must be >= 2 for a classifier")
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture={self.architecture!r} is not allowed; allowed: {', '.join(ARCHITECTURES)}")
        if self.norm not in NORMS:
            raise ValueError(f"norm={self.norm!r} is not allowed; allowed: {', '.join(NORMS)}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling={self.pooling!r} is not allowed; allowed: {', '.join(POOLINGS)}")
        _check_causal_pooling(self.classifier_causal, self.architecture, self.pooling)
        if self.embedding_std is not None and not self.embedding_std > 0:
            raise ValueError(f"embedding_std={self.embedding_std} must be > 0 (or None: PyTorch's initialisation)")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout={self.dropout} must be in [0, 1)")
        if self.attention not in ATTENTION:
            raise ValueError(f"attention={self.attention!r} is not allowed; allowed: {', '.join(ATTENTION)}")
        self.attention_knobs().check(d_model=self.d_model, num_heads=self.num_heads, num_layers=self.num_layers)

    def attention_knobs(self) -> AttentionKnobs:
        """The attention family's knobs (its ``Knobs`` dataclass), with this config's values."""
        return _family_knobs({name: getattr(self, name) for name in knob_names(self)})

    @classmethod
    def check_knobs(cls, knobs: Mapping[str, Any]) -> None:
        """Check model knob values together, the others at their defaults, before any model exists.

        Raises:
            ValueError: an unknown attention variant, or the family's own message (knob,
                value, what is allowed).
        """
        values = {f.name: f.default for f in knob_fields(cls)} | dict(knobs)
        _check_causal_pooling(bool(values["classifier_causal"]), cls.architecture, str(values["pooling"]))
        lookup(ATTENTION, str(values["attention"]), "attention")
        _family_knobs(values).check(d_model=values["d_model"], num_heads=values["num_heads"], num_layers=values["num_layers"])

    @property
    def is_damcha(self) -> bool:
        """Whether the attention is a DAMCHA variant (fused or explicit), which takes the DAMCHA knobs."""
        return issubclass(ATTENTION[self.attention], DAMCHA)

    @property
    def causal(self) -> bool:
        """Whether attention is causal (the decoder; a classifier with ``classifier_causal``)."""
        return self.architecture == "decoder" or self.classifier_causal

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
