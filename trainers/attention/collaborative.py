"""Collaborative multi-head attention (Cordonnier et al., 2021), as the DAMCHA authors'
baseline has it: query and key projections shared by all heads, each head's query and
key a learned combination (H×H coefficients, identity at start) of the shared ones'
head slices. The combination happens before SDPA, so the kernel is MHA's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from trainers.attention.family import AttentionKnobs
from trainers.attention.mha import HeadAttention


@dataclass(frozen=True, kw_only=True)
class ColMHAKnobs(AttentionKnobs):
    """Collaborative attention's own knobs: none (its coefficients are H×H)."""

    def layer_flops(self, *, length: int, d_model: int, num_heads: int) -> tuple[int, int]:
        """MHA's projections, the two recombinations (2·T·D·H each) and MHA's core."""
        dense = 8 * length * d_model * d_model + 4 * length * d_model * num_heads
        return dense, 4 * length * length * d_model


class CollaborativeAttention(HeadAttention):
    """Collaborative multi-head attention (arguments: ``HeadAttention``'s)."""

    Knobs: ClassVar[type[AttentionKnobs]] = ColMHAKnobs

    def __init__(self, d_model: int, num_heads: int, *, causal: bool = False, dropout: float = 0.0) -> None:
        super().__init__(d_model, num_heads, causal=causal, dropout=dropout)
        self.shared_query = nn.Linear(d_model, d_model, bias=False)
        self.shared_key = nn.Linear(d_model, d_model, bias=False)
        self.value_proj = nn.Linear(d_model, d_model)
        self.query_mix = nn.Parameter(torch.eye(num_heads))  # (H, H_src)
        self.key_mix = nn.Parameter(torch.eye(num_heads))  # (H, H_src)

    def _combine(self, shared: Tensor, mix: Tensor) -> Tensor:
        """(B, T, D) shared projection -> (B, T, D) whose head h is ``Σ_i mix_hi`` slice i."""
        batch, length, width = shared.shape
        slices = shared.view(batch, length, self.num_heads, width // self.num_heads)  # (B, T, H_src, d)
        return torch.einsum("hi,btic->bthc", mix, slices).reshape(batch, length, width)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, D) -> queries, keys, values, each (B, T, D)."""
        q = self._combine(self.shared_query(x), self.query_mix)
        k = self._combine(self.shared_key(x), self.key_mix)
        return q, k, self.value_proj(x)
