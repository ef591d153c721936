"""Talking-Heads attention (Shazeer et al., 2020): learned H×H maps mix the heads' logits
before the softmax and their weights after it; both start as the identity (MHA)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from trainers.attention.family import AttentionKnobs
from trainers.attention.head_mixing import attend_all_heads, head_logits, mix_heads, mixed_queries
from trainers.attention.mha import MultiHeadAttention
from trainers.attention.sdpa import masked_softmax, merge_heads, split_heads


@dataclass(frozen=True, kw_only=True)
class THAKnobs(AttentionKnobs):
    """Talking-Heads' own knobs: none (its maps are H×H)."""

    def layer_flops(self, *, length: int, d_model: int, num_heads: int) -> tuple[int, int]:
        """MHA's projections and the post-softmax mix (2·T·D·H; the query-side pre-mix is
        element-wise); the core runs H heads of width D over all heads' values: 4·H·T²·D."""
        dense = 8 * length * d_model * d_model + 2 * length * d_model * num_heads
        return dense, 4 * num_heads * length * length * d_model


class TalkingHeadsAttention(MultiHeadAttention):
    """Talking-Heads attention, fused (see ``trainers.attention.head_mixing``).

    Head h's weights are ``Σ_j P'_hj softmax(Σ_i P_ji L_i)`` over the logits ``L_i`` of
    each head's own query and key; its output applies them to its own values ``V_h``.

    Args: ``HeadAttention``'s.
    """

    Knobs: ClassVar[type[AttentionKnobs]] = THAKnobs

    def __init__(self, d_model: int, num_heads: int, *, causal: bool = False, dropout: float = 0.0) -> None:
        super().__init__(d_model, num_heads, causal=causal, dropout=dropout)
        self.logit_mix = nn.Parameter(torch.eye(num_heads))  # P: (H, H), before the softmax
        self.weight_mix = nn.Parameter(torch.eye(num_heads))  # P': (H, H), after it

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Attend: (B, T, D) -> (B, T, D) (``padding_mask``: (B, T) bool, True = real token)."""
        q, k, v = self.project(x)  # (B, T, D) each
        q_mixed = mixed_queries(q, self.logit_mix)  # (B, H, T, D)
        attended = attend_all_heads(  # [:, j, :, h] = A_j V_h: (B, H, T, H, d)
            q_mixed, k, v, padding_mask, causal=self.causal, dropout_p=self.attention_dropout()
        )
        out = torch.einsum("hj,bjthd->bhtd", self.weight_mix, attended)  # Σ_j P'_hj A_j V_h: (B, H, T, d)
        return self.out_proj(merge_heads(out))  # (B, T, D)

    def explicit(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """The formula read literally, with materialised (B, H, T, T) logits and weights."""
        q, k, v = self.project(x)  # (B, T, D) each
        logits = mix_heads(head_logits(q, k, self.num_heads), self.logit_mix)  # (B, H, T, T)
        weights = mix_heads(masked_softmax(logits, padding_mask, causal=self.causal), self.weight_mix)
        return self.out_proj(merge_heads(weights @ split_heads(v, self.num_heads)))  # (B, T, D)
