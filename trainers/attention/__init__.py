"""Attention variants, selected by name through one forward signature.

Each variant class names its knobs' dataclass as ``Knobs`` (an ``AttentionKnobs``:
``MHAKnobs``, ``DAMCHAKnobs``, ``THAKnobs`` ...): the model config, the search space, the
builders and the FLOP count derive from it. Every variant is called as
``attn(x, padding_mask=None)`` with ``x: (B, T, D)`` and ``padding_mask: (B, T)`` bool
(True = real token) and returns ``(B, T, D)``. Each runs through the fused SDPA kernel;
``reference_attention`` is the explicit oracle (materialised scores), and
``damcha_explicit`` runs DAMCHA through it.

Families: ``mha``; ``damcha``; the cross-head baselines the DAMCHA paper compares
against: ``tha`` (Talking-Heads), ``dcmha`` (DCFormer's composition), ``colmha``
(collaborative), ``mma`` (mixed roles), ``moa`` (mixture of attention heads).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from common.naming import lookup
from trainers.attention.collaborative import CollaborativeAttention, ColMHAKnobs
from trainers.attention.damcha import DAMCHA, DEFAULT_METRIC_CHUNK, METRIC_FORMS, METRIC_MODES, DAMCHAKnobs, parse_sharing
from trainers.attention.dcmha import DCMHAKnobs, DynamicComposableAttention
from trainers.attention.family import AttentionKnobs
from trainers.attention.metric import Metric, MetricGenerator, sequence_context
from trainers.attention.mha import MHAKnobs, MultiHeadAttention
from trainers.attention.mixed_roles import MixedRoleAttention, MMAKnobs
from trainers.attention.mixture import MixtureOfAttentionHeads, MoAKnobs
from trainers.attention.reference import ExplicitDAMCHA, reference_attention
from trainers.attention.talking_heads import TalkingHeadsAttention, THAKnobs

ATTENTION: dict[str, type[nn.Module]] = {
    "mha": MultiHeadAttention,
    "damcha": DAMCHA,
    "damcha_explicit": ExplicitDAMCHA,  # the eager reference, for benchmarks
    "tha": TalkingHeadsAttention,
    "dcmha": DynamicComposableAttention,
    "colmha": CollaborativeAttention,
    "mma": MixedRoleAttention,
    "moa": MixtureOfAttentionHeads,
}
CROSS_HEAD_BASELINES: tuple[str, ...] = ("tha", "dcmha", "colmha", "mma", "moa")


def build_attention(name: str, d_model: int, num_heads: int, **knobs: Any) -> nn.Module:
    """Build an attention layer by registry name.

    Args:
        name: A key of ``ATTENTION``.
        d_model: Model width.
        num_heads: Head count.
        **knobs: The variant's keyword-only arguments.

    Returns:
        The layer.

    Raises:
        UnknownNameError: ``name`` is not registered ("did you mean ...").
    """
    return lookup(ATTENTION, name, "attention")(d_model, num_heads, **knobs)


__all__ = [
    "ATTENTION",
    "AttentionKnobs",
    "CROSS_HEAD_BASELINES",
    "ColMHAKnobs",
    "CollaborativeAttention",
    "DCMHAKnobs",
    "DynamicComposableAttention",
    "MMAKnobs",
    "MixedRoleAttention",
    "MixtureOfAttentionHeads",
    "MoAKnobs",
    "THAKnobs",
    "TalkingHeadsAttention",
    "DAMCHA",
    "DAMCHAKnobs",
    "DEFAULT_METRIC_CHUNK",
    "METRIC_FORMS",
    "ExplicitDAMCHA",
    "METRIC_MODES",
    "MHAKnobs",
    "Metric",
    "MetricGenerator",
    "MultiHeadAttention",
    "build_attention",
    "reference_attention",
    "sequence_context",
    "parse_sharing",
]
