"""Dynamically composable multi-head attention (DCFormer, Xiao et al., 2024), as the DAMCHA
authors' baseline has it: per query position, an input-dependent H×H composition of the
heads' logits, gated per head against the raw logits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from trainers.attention.family import AttentionKnobs
from trainers.attention.head_mixing import attend_all_heads, head_logits, mixed_queries
from trainers.attention.mha import MultiHeadAttention
from trainers.attention.sdpa import masked_softmax, merge_heads, split_heads
from trainers.knob_declarations import knob


@dataclass(frozen=True, kw_only=True)
class DCMHAKnobs(AttentionKnobs):
    """DCMHA's own knob: the router's hidden width."""

    router_rank: int = knob(4, choices=(2, 4, 8, 16, 32), help="DCMHA: hidden width of the per-query head-composition router")

    POSITIVE_INTEGERS: ClassVar[tuple[str, ...]] = ("router_rank",)

    def layer_flops(self, *, length: int, d_model: int, num_heads: int) -> tuple[int, int]:
        """MHA's projections, the router ``D → r → H²`` and the gate ``D → H``; the core runs
        H heads of width D over all heads' values (4·H·T²·D)."""
        router = d_model * self.router_rank + self.router_rank * num_heads**2
        dense = 8 * length * d_model * d_model + 2 * length * (router + d_model * num_heads)
        return dense, 4 * num_heads * length * length * d_model


class DynamicComposableAttention(MultiHeadAttention):
    """DCMHA, fused: the per-query composition folds into the query (``head_mixing``).

    Head h's logits at query t are ``g_h(t) Σ_i α_ih(t) L_i + (1 - g_h(t)) L_h`` with
    ``α(t) = softmax over source heads i of Linear(r, H²)(tanh(Linear(D, r)(x_t)))`` and
    ``g(t) = sigmoid(Linear(D, H)(x_t))``: one H×H matrix ``C(t)`` per query, which mixes
    the queries.

    Args:
        d_model, num_heads, causal, dropout: ``HeadAttention``'s.
        router_rank: The router's hidden width r.
    """

    Knobs: ClassVar[type[AttentionKnobs]] = DCMHAKnobs

    def __init__(self, d_model: int, num_heads: int, *, causal: bool = False, dropout: float = 0.0, router_rank: int = 4) -> None:
        super().__init__(d_model, num_heads, causal=causal, dropout=dropout)
        DCMHAKnobs(router_rank=router_rank).check(d_model=d_model, num_heads=num_heads)
        self.router = nn.Sequential(nn.Linear(d_model, router_rank), nn.Tanh(), nn.Linear(router_rank, num_heads**2))
        self.gate = nn.Linear(d_model, num_heads)

    def composition(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The router's weights and the gate, per query.

        Args:
            x: (B, T, D).

        Returns:
            α: (B, T, H_src, H), a softmax over source heads; g: (B, T, H) in (0, 1).
        """
        batch, length, _ = x.shape
        heads = self.num_heads
        alpha = self.router(x).view(batch, length, heads, heads).softmax(dim=-2)  # (B, T, H_src, H)
        return alpha, torch.sigmoid(self.gate(x))  # (B, T, H)

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Attend: (B, T, D) -> (B, T, D) (``padding_mask``: (B, T) bool, True = real token)."""
        alpha, gate = self.composition(x)
        identity = torch.eye(self.num_heads, dtype=x.dtype, device=x.device)
        # C(t)[h, i] = g_h α_ih + (1 - g_h) δ_hi: (B, T, H, H_src)
        mix = gate[..., None] * alpha.transpose(-1, -2) + (1 - gate)[..., None] * identity
        q, k, v = self.project(x)  # (B, T, D) each
        attended = attend_all_heads(  # [:, h, :, j] = A_h V_j: (B, H, T, H, d)
            mixed_queries(q, mix), k, v, padding_mask, causal=self.causal, dropout_p=self.attention_dropout()
        )
        out = attended.diagonal(dim1=1, dim2=3)  # A_h V_h: (B, T, d, H)
        return self.out_proj(out.permute(0, 1, 3, 2).flatten(2))  # (B, T, D)

    def explicit(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """The formula read literally, with materialised (B, H, T, T) logits."""
        alpha, gate = self.composition(x)
        q, k, v = self.project(x)  # (B, T, D) each
        logits = head_logits(q, k, self.num_heads)  # (B, H, T, T)
        composed = torch.einsum("btih,bits->bhts", alpha, logits)  # Σ_i α_ih(t) L_i(t, s)
        g = gate.transpose(1, 2)[..., None]  # (B, H, T, 1)
        weights = masked_softmax(g * composed + (1 - g) * logits, padding_mask, causal=self.causal)
        return self.out_proj(merge_heads(weights @ split_heads(v, self.num_heads)))  # (B, T, D)
