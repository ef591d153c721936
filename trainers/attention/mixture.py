"""Mixture of attention heads (MoA, Zhang et al., 2022): E single-head experts; per token,
a router picks the top H and gates their outputs, each expert with its own output
projection. Fused: SDPA runs every expert over the sequence (keys and values are every
position's), then each token keeps the gated outputs of its own experts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from trainers.attention.family import AttentionKnobs
from trainers.attention.sdpa import explicit_attention, fused_attention, merge_heads, split_heads
from trainers.knob_declarations import knob


@dataclass(frozen=True, kw_only=True)
class MoAKnobs(AttentionKnobs):
    """MoA's own knob: experts per head."""

    expert_factor: int = knob(
        2, choices=(1, 2, 4), help="MoA: experts per head (E = factor x heads single-head experts; each token uses H)"
    )

    POSITIVE_INTEGERS: ClassVar[tuple[str, ...]] = ("expert_factor",)

    def layer_flops(self, *, length: int, d_model: int, num_heads: int) -> tuple[int, int]:
        """Every expert's Q, K, V and output projection (E·d = factor·D wide), the router
        ``D → E``; the core runs E heads of width d: 4·T²·D·factor."""
        experts = num_heads * self.expert_factor
        dense = 8 * length * d_model * d_model * self.expert_factor + 2 * length * d_model * experts
        return dense, 4 * length * length * d_model * self.expert_factor


class MixtureOfAttentionHeads(nn.Module):
    """Mixture of attention heads.

    Args:
        d_model: Model width D.
        num_heads: Experts each token uses, H (its experts' outputs add up to D wide).
        causal: Causal self-attention.
        dropout: Attention dropout probability (training only).
        expert_factor: Experts per head: E = factor·H single-head experts of width D/H.

    Raises:
        ValueError: an invalid knob (see ``MoAKnobs.check``).
    """

    Knobs: ClassVar[type[AttentionKnobs]] = MoAKnobs

    def __init__(
        self, d_model: int, num_heads: int, *, causal: bool = False, dropout: float = 0.0, expert_factor: int = 2
    ) -> None:
        super().__init__()
        MoAKnobs(expert_factor=expert_factor).check(d_model=d_model, num_heads=num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_experts = num_heads * expert_factor
        self.causal = causal
        self.dropout = dropout
        expert_width = self.num_experts * (d_model // num_heads)  # E·d
        self.qkv_proj = nn.Linear(d_model, 3 * expert_width)
        self.router = nn.Linear(d_model, self.num_experts)
        self.out_proj = nn.Linear(expert_width, d_model)  # expert e's rows are its own output projection

    def gates(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, E): a softmax over each token's top-H router logits, 0 elsewhere."""
        logits = self.router(x)  # (B, T, E)
        top, chosen = logits.topk(self.num_heads, dim=-1)  # (B, T, H) each
        weights = top.softmax(dim=-1)  # fp32 under CUDA's autocast, whose logits are bf16
        return torch.zeros_like(logits, dtype=weights.dtype).scatter(-1, chosen, weights)

    def _experts(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, D) -> every expert's queries, keys, values, each (B, E, T, d)."""
        return tuple(split_heads(t, self.num_experts) for t in self.qkv_proj(x).chunk(3, dim=-1))

    def _combine(self, expert_outputs: Tensor, x: Tensor) -> Tensor:
        """(B, E, T, d) every expert's output -> (B, T, D): the chosen ones', gated, projected."""
        gated = expert_outputs * self.gates(x).transpose(1, 2)[..., None]  # (B, E, T, d)
        return self.out_proj(merge_heads(gated))  # (B, T, D)

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Attend: (B, T, D) -> (B, T, D) (``padding_mask``: (B, T) bool, True = real token)."""
        q, k, v = self._experts(x)
        dropout_p = self.dropout if self.training else 0.0
        out = fused_attention(q, k, v, padding_mask, causal=self.causal, dropout_p=dropout_p)  # (B, E, T, d)
        return self._combine(out, x)

    def explicit(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Materialised (B, E, T, T) scores, no dropout: the test oracle."""
        q, k, v = self._experts(x)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, E, T, T)
        return self._combine(explicit_attention(scores, v, padding_mask, causal=self.causal), x)
