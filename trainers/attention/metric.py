"""The data-generated cross-head metric of DAMCHA: context, generator, application.

The metric is ``M(c) = I + U(c) V(c)ᵀ / √r`` (low rank) or ``I + W(c)`` (full), with
``c`` the masked mean of the generator's input (prefix means when causal, so that the
metric varies by position without leaking the future). The reference mode of the
authors' code uses ``M = U Vᵀ / √r`` or ``W`` without the identity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

Rank = int | Literal["full"]


def sequence_context(x: Tensor, padding_mask: Tensor | None, *, causal: bool) -> Tensor:
    """Mean of the real (non-padding) tokens.

    Args:
        x: (B, T, D).
        padding_mask: (B, T) bool, True = real token, or None.
        causal: Return prefix means (position t averages tokens ≤ t) instead.

    Returns:
        (B, D), or (B, T, D) when causal.
    """
    if padding_mask is None:
        weights = x.new_ones(x.shape[0], x.shape[1], 1)  # (B, T, 1)
    else:
        weights = padding_mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    if causal:
        total = (x * weights).cumsum(dim=1)  # (B, T, D)
        count = weights.cumsum(dim=1).clamp(min=1.0)  # (B, T, 1)
    else:
        total = (x * weights).sum(dim=1)  # (B, D)
        count = weights.sum(dim=1).clamp(min=1.0)  # (B, 1)
    return total / count


@dataclass(frozen=True)
class Metric:
    """The generated part of a metric for one batch: low-rank factors or a full matrix.

    Shapes carry a position axis T only when the metric varies by position (causal
    models with an input-dependent generator).

    Attributes:
        u, v: (B, D, r) or (B, T, D, r) factors of ``U Vᵀ / √r``; None for a full metric.
        full: (B, D, D) or (B, T, D, D) matrix ``W``; None for a low-rank metric.
    """

    u: Tensor | None = None
    v: Tensor | None = None
    full: Tensor | None = None

    @property
    def per_position(self) -> bool:
        """Whether the metric has a position axis."""
        return (self.full if self.full is not None else self.u).dim() == 4

    def times_identity_plus(self, x: Tensor, *, transposed: bool) -> Tensor:
        """Right-multiply rows of ``x`` by ``I + A`` (or its transpose), A = U Vᵀ/√r or W.

        Costs O(T·D·r) at rank r: no D×D matrix is formed, per sequence or per position.

        Args:
            x: (B, T, D) rows, one per token.
            transposed: Multiply by ``(I + A)ᵀ`` instead of ``I + A``.

        Returns:
            (B, T, D).
        """
        if self.full is not None:
            if self.per_position:
                pattern = "btj,btij->bti" if transposed else "bti,btij->btj"
                return x + torch.einsum(pattern, x, self.full)
            return x + x @ (self.full.transpose(-1, -2) if transposed else self.full)
        # x (I + U Vᵀ/√r) = x + (x U) Vᵀ/√r;  x (I + U Vᵀ/√r)ᵀ = x + (x V) Uᵀ/√r
        left, right = (self.v, self.u) if transposed else (self.u, self.v)
        scale = 1.0 / math.sqrt(left.shape[-1])
        if self.per_position:
            coords = torch.einsum("btd,btdr->btr", x, left)  # (B, T, r)
            return x + scale * torch.einsum("btr,btdr->btd", coords, right)
        coords = x @ left  # (B, T, r)
        return x + scale * (coords @ right.transpose(-1, -2))  # (B, T, D)

    def matrix(self, *, plus_identity: bool) -> Tensor:
        """The explicit D×D matrix (for reference implementations and analysis only).

        Args:
            plus_identity: Return ``I + A`` rather than ``A``.

        Returns:
            (B, D, D) or (B, T, D, D).
        """
        if self.full is not None:
            dense = self.full
        else:
            dense = self.u @ self.v.transpose(-1, -2) / math.sqrt(self.u.shape[-1])
        if plus_identity:
            dense = dense + torch.eye(dense.shape[-1], dtype=dense.dtype, device=dense.device)
        return dense


class MetricGenerator(nn.Module):
    """MLP from a context vector to a metric (``U, V`` factors or a full ``W``).

    Args:
        d_model: Model width D.
        rank: Rank r of ``U Vᵀ``, or ``"full"`` for all D² entries.
        depth: Hidden layers of the MLP (GELU). 0 = a static metric: plain parameters,
            independent of the input.
        width: Hidden width of the MLP.
        identity_start: Start with ``U = 0`` (or ``W = 0``) so that ``I + A = I``. The V
            part does not start at zero: with both at zero ``U Vᵀ`` would get no gradient.
    """

    def __init__(self, d_model: int, *, rank: Rank, depth: int, width: int, identity_start: bool) -> None:
        super().__init__()
        self.d_model = d_model
        self.rank = rank
        self.depth = depth
        out_features = d_model * d_model if rank == "full" else 2 * d_model * rank
        # Parameters are laid out [U (D·r) | V (D·r)] or [W (D·D)]; U (or W) comes first.
        first_part = d_model * d_model if rank == "full" else d_model * rank
        if depth == 0:
            self.static = nn.Parameter(torch.randn(out_features) / math.sqrt(d_model))
            self.hidden = None
            self.output = None
            if identity_start:
                with torch.no_grad():
                    self.static[:first_part].zero_()
        else:
            layers: list[nn.Module] = []
            fan_in = d_model
            for _ in range(depth):
                layers += [nn.Linear(fan_in, width), nn.GELU()]
                fan_in = width
            self.static = None
            self.hidden = nn.Sequential(*layers)
            self.output = nn.Linear(width, out_features)
            if identity_start:
                with torch.no_grad():
                    self.output.weight[:first_part].zero_()
                    self.output.bias[:first_part].zero_()

    def forward(self, context: Tensor) -> Metric:
        """Generate the metric.

        Args:
            context: (B, D) or (B, T, D) context vectors.

        Returns:
            The metric; per position when ``context`` has a position axis and depth > 0.
        """
        if self.static is not None:
            flat = self.static.expand(context.shape[0], -1)  # (B, out): same for every input
        else:
            flat = self.output(self.hidden(context))  # (B, [T,] out)
        lead = flat.shape[:-1]
        d = self.d_model
        if self.rank == "full":
            return Metric(full=flat.view(*lead, d, d))
        u, v = flat.view(*lead, 2, d, self.rank).unbind(dim=-3)  # (B, [T,] D, r) each
        return Metric(u=u, v=v)
