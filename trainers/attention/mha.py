"""Multi-head attention, the baseline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor, nn

from trainers.attention.sdpa import check_heads, fused_attention, merge_heads, split_heads


@dataclass(frozen=True, kw_only=True)
class MHAKnobs:
    """Multi-head attention's own knobs: none (width and heads are every family's)."""

    def check(self, *, d_model: int, num_heads: int, num_layers: int | None = None) -> None:
        """Check the knobs against the model's shape.

        Raises:
            ValueError: ``num_heads`` does not divide ``d_model``.
        """
        check_heads(d_model, num_heads)


class MultiHeadAttention(nn.Module):
    """Standard multi-head self-attention through the fused SDPA kernel.

    Args:
        d_model: Model width D.
        num_heads: Head count H; must divide ``d_model``.
        causal: Causal self-attention.
        dropout: Attention dropout probability (training only).
    """

    Knobs: ClassVar[type[MHAKnobs]] = MHAKnobs

    def __init__(self, d_model: int, num_heads: int, *, causal: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        MHAKnobs().check(d_model=d_model, num_heads=num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.causal = causal
        self.dropout = dropout
        self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, D) -> queries, keys, values, each (B, T, D)."""
        return self.qkv_proj(x).chunk(3, dim=-1)

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Attend.

        Args:
            x: (B, T, D).
            padding_mask: (B, T) bool, True = real token.

        Returns:
            (B, T, D).
        """
        q, k, v = (split_heads(t, self.num_heads) for t in self.project(x))  # (B, H, T, d) each
        dropout_p = self.dropout if self.training else 0.0
        out = fused_attention(q, k, v, padding_mask, causal=self.causal, dropout_p=dropout_p)
        return self.out_proj(merge_heads(out))  # (B, T, D)
