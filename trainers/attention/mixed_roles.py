"""Mixed multi-head attention: heads in four role groups that see different positions.

Head h has role ``ROLES[h % 4]``. Bidirectional: ``global`` sees every position,
``local`` those within ``local_window`` on either side, ``forward`` the past and present,
``backward`` the present and future. Causal: every role sees the past and present only
(``local`` within the window), so ``backward`` heads become ``forward`` ones. (The DAMCHA
authors' causal decoder lets its backward heads see the future.) Fused: one SDPA call per
role on its heads. Only ``local`` needs a T×T mask: ``global`` and ``forward`` are plain
or causal attention, ``backward`` is causal attention on the time-reversed sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from trainers.attention.family import AttentionKnobs
from trainers.attention.mha import MultiHeadAttention
from trainers.attention.sdpa import fused_attention, kernel_inputs, merge_heads, split_heads
from trainers.knob_declarations import knob

ROLES: tuple[str, ...] = ("global", "local", "forward", "backward")


@dataclass(frozen=True, kw_only=True)
class MMAKnobs(AttentionKnobs):
    """Mixed attention's own knob: the local heads' window."""

    local_window: int = knob(
        8, choices=(2, 4, 8, 16, 32, 64, 128), help="mixed MHA: positions a local head sees on each side, itself included"
    )

    POSITIVE_INTEGERS: ClassVar[tuple[str, ...]] = ("local_window",)

    def layer_flops(self, *, length: int, d_model: int, num_heads: int) -> tuple[int, int]:
        """MHA's: the roles only mask (each role's SDPA call is counted over its full T×T)."""
        return 8 * length * d_model * d_model, 4 * length * length * d_model


def role_mask(role: str, length: int, *, window: int, causal: bool, device: torch.device) -> Tensor:
    """(T, T) bool: which keys s a query t of this role may see (always itself)."""
    t = torch.arange(length, device=device)[:, None]
    s = torch.arange(length, device=device)[None, :]
    past = s <= t
    if role == "local":
        near = (t - s).abs() < window
        return near & past if causal else near
    if causal or role == "forward":
        return past
    return s >= t if role == "backward" else torch.ones(length, length, dtype=torch.bool, device=device)


class MixedRoleAttention(MultiHeadAttention):
    """Mixed multi-head attention.

    Args:
        d_model, num_heads, causal, dropout: ``HeadAttention``'s.
        local_window: Positions a local head sees on each side, itself included.
    """

    Knobs: ClassVar[type[AttentionKnobs]] = MMAKnobs

    def __init__(
        self, d_model: int, num_heads: int, *, causal: bool = False, dropout: float = 0.0, local_window: int = 8
    ) -> None:
        super().__init__(d_model, num_heads, causal=causal, dropout=dropout)
        MMAKnobs(local_window=local_window).check(d_model=d_model, num_heads=num_heads)
        self.local_window = local_window

    def mask(self, role: str, length: int, padding_mask: Tensor | None, device: torch.device) -> Tensor:
        """(B or 1, 1, T, T) bool: the role's positions, padding keys hidden (a padding query keeps itself)."""
        allowed = role_mask(role, length, window=self.local_window, causal=self.causal, device=device)[None, None]
        if padding_mask is None:
            return allowed
        itself = torch.eye(length, dtype=torch.bool, device=device)
        return allowed & (padding_mask[:, None, None, :] | itself)  # (B, 1, T, T)

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Attend: (B, T, D) -> (B, T, D) (``padding_mask``: (B, T) bool, True = real token)."""
        q, k, v = (split_heads(t, self.num_heads) for t in self.project(x))  # (B, H, T, d) each
        roles = len(ROLES)
        outputs, order = [], []
        for index, role in enumerate(ROLES[: self.num_heads]):
            heads = slice(index, None, roles)  # this role's heads: index, index + 4, ...
            outputs.append(self._attend(role, q[:, heads], k[:, heads], v[:, heads], padding_mask))
            order.extend(range(self.num_heads)[heads])
        by_role = torch.cat(outputs, dim=1)  # (B, H, T, d), heads in role order
        out = by_role[:, torch.tensor(order, device=x.device).argsort()]  # (B, H, T, d), heads in their own order
        return self.out_proj(merge_heads(out))  # (B, T, D)

    def _attend(self, role: str, q: Tensor, k: Tensor, v: Tensor, padding_mask: Tensor | None) -> Tensor:
        """One role's heads, (B, h, T, d) each -> (B, h, T, d), on the fused kernel."""
        dropout_p = self.attention_dropout()
        if role == "local":  # a band: the one role that needs its own T×T mask
            mask = self.mask(role, q.shape[-2], padding_mask, q.device)
            return F.scaled_dot_product_attention(*kernel_inputs(q, k, v), attn_mask=mask, dropout_p=dropout_p)
        if role == "backward" and not self.causal:  # the present and future: causal on the reversed sequence
            reversed_mask = None if padding_mask is None else padding_mask.flip(-1)
            flipped = (t.flip(-2) for t in (q, k, v))
            return fused_attention(*flipped, reversed_mask, causal=True, dropout_p=dropout_p).flip(-2)
        return fused_attention(q, k, v, padding_mask, causal=self.causal or role == "forward", dropout_p=dropout_p)

    def explicit(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Materialised (B, H, T, T) scores, each head masked by its role."""
        q, k, v = (split_heads(t, self.num_heads) for t in self.project(x))  # (B, H, T, d) each
        length = x.shape[1]
        masks = torch.cat(
            [self.mask(ROLES[h % len(ROLES)], length, padding_mask, x.device) for h in range(self.num_heads)], dim=1
        )  # (B or 1, H, T, T)
        scores = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).masked_fill(~masks, float("-inf"))
        return self.out_proj(merge_heads(scores.softmax(dim=-1) @ v))  # (B, T, D)
