"""Multi-head attention, the baseline, and the projections several cross-head families share."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor, nn

from trainers.attention.family import AttentionKnobs
from trainers.attention.sdpa import check_heads, explicit_attention, fused_attention, merge_heads, split_heads


@dataclass(frozen=True, kw_only=True)
class MHAKnobs(AttentionKnobs):
    """Multi-head attention's own knobs: none (width and heads are every family's)."""

    def layer_flops(self, *, length: int, d_model: int, num_heads: int) -> tuple[int, int]:
        """Q, K, V and output projections; the core ``softmax(Q Kᵀ) V`` at 4·T²·D."""
        return 8 * length * d_model * d_model, 4 * length * length * d_model


class HeadAttention(nn.Module):
    """Self-attention of H heads over projected queries, keys and values, through the fused
    SDPA kernel; a subclass says how it projects (``project``).

    Args:
        d_model: Model width D.
        num_heads: Head count H; must divide ``d_model``.
        causal: Causal self-attention.
        dropout: Attention dropout probability (training only).

    Raises:
        ValueError: ``num_heads`` does not divide ``d_model``.
    """

    def __init__(self, d_model: int, num_heads: int, *, causal: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        check_heads(d_model, num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.causal = causal
        self.dropout = dropout
        self.out_proj = nn.Linear(d_model, d_model)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, D) -> queries, keys, values, each (B, T, D)."""
        raise NotImplementedError

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Attend.

        Args:
            x: (B, T, D).
            padding_mask: (B, T) bool, True = real token.

        Returns:
            (B, T, D).
        """
        q, k, v = (split_heads(t, self.num_heads) for t in self.project(x))  # (B, H, T, d) each
        out = fused_attention(q, k, v, padding_mask, causal=self.causal, dropout_p=self.attention_dropout())
        return self.out_proj(merge_heads(out))  # (B, T, D)

    def attention_dropout(self) -> float:
        """The attention dropout probability in this mode (0 in eval mode)."""
        return self.dropout if self.training else 0.0

    def explicit(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """The same function with materialised (B, H, T, T) scores, no dropout: the test oracle."""
        q, k, v = (split_heads(t, self.num_heads) for t in self.project(x))  # (B, H, T, d) each
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, T, T)
        return self.out_proj(merge_heads(explicit_attention(scores, v, padding_mask, causal=self.causal)))


class MultiHeadAttention(HeadAttention):
    """Standard multi-head self-attention (arguments: ``HeadAttention``'s)."""

    Knobs: ClassVar[type[AttentionKnobs]] = MHAKnobs

    def __init__(self, d_model: int, num_heads: int, *, causal: bool = False, dropout: float = 0.0) -> None:
        super().__init__(d_model, num_heads, causal=causal, dropout=dropout)
        self.qkv_proj = nn.Linear(d_model, 3 * d_model)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, D) -> queries, keys, values, each (B, T, D)."""
        return self.qkv_proj(x).chunk(3, dim=-1)
