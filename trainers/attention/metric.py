"""The data-generated cross-head metric of DAMCHA: context, generator, application.

The metric is ``M(c) = I + U(c) V(c)ᵀ / √r`` (low rank) or ``I + W(c)`` (full), with
``c`` the masked mean of the generator's input. Causal models use one metric per chunk
of positions, generated from the prefix mean up to the chunk's first position, so that
the metric varies along the sequence without reading the future; a chunk of 1 is one
metric per position. The reference mode of the authors' code uses ``M = U Vᵀ / √r`` or
``W`` without the identity, and needs only the row sums ``m_h = Σ_j M_hj`` of its blocks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Rank = int | Literal["full"]


def chunk_count(length: int, chunk: int) -> int:
    """Chunks of ``chunk`` positions that cover ``length`` positions (the last may be short)."""
    return -(-length // chunk)


def sequence_context(x: Tensor, padding_mask: Tensor | None, *, chunk: int | None) -> Tensor:
    """Masked mean of the real (non-padding) tokens: of the whole sequence, or of each prefix
    that ends at a chunk's first position.

    Args:
        x: (B, T, D).
        padding_mask: (B, T) bool, True = real token, or None.
        chunk: None for one context per sequence; C for one context per chunk of C
            positions, the mean of the tokens at positions ≤ i·C for chunk i (nothing
            from later in the chunk, so no position sees a token after itself).

    Returns:
        (B, D), or (B, N, D) with N = ceil(T / C) when ``chunk`` is given.
    """
    weights = None if padding_mask is None else padding_mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    weighted = x if weights is None else x * weights  # (B, T, D)
    if chunk is None:
        count = x.shape[1] if weights is None else weights.sum(dim=1).clamp(min=1.0)  # (B, 1)
        return weighted.sum(dim=1) / count  # (B, D)

    def prefix_sums(values: Tensor) -> Tensor:
        # Σ_{t ≤ i·C} = (sums of the chunks before i, all whole) + the value at i·C: no (B, T, ·) cumsum.
        before = chunk_count(values.shape[1], chunk) - 1
        sums = values[:, : before * chunk].unflatten(1, (before, chunk)).sum(dim=2)  # (B, N-1, ·)
        return F.pad(sums, (0, 0, 1, 0)).cumsum(dim=1) + values[:, ::chunk]  # (B, N, ·)

    if weights is None:
        positions = torch.arange(0, x.shape[1], chunk, device=x.device, dtype=x.dtype)  # (N,)
        return prefix_sums(weighted) / (positions + 1.0)[None, :, None]  # (B, N, D)
    return prefix_sums(weighted) / prefix_sums(weights).clamp(min=1.0)  # (B, N, D)


@dataclass(frozen=True)
class Metric:
    """The generated part of a metric for one batch: low-rank factors, a full matrix, or,
    for the reference mode at full rank, only the row sums of its head blocks.

    With ``chunk`` set, every tensor has a chunk axis N after the batch axis: one metric
    per chunk of ``chunk`` positions (causal models); otherwise one metric per sequence.

    Attributes:
        u, v: (B, [N,] D, r) factors of ``U Vᵀ / √r``; None otherwise.
        full: (B, [N,] D, D) matrix ``W``; None otherwise.
        row_sums: (B, [N,] H, d, d) blocks ``m_h = Σ_j W_hj``; None otherwise.
        chunk: Positions per metric along the sequence, or None for one per sequence.
    """

    u: Tensor | None = None
    v: Tensor | None = None
    full: Tensor | None = None
    row_sums: Tensor | None = None
    chunk: int | None = None

    def _grouped(self, x: Tensor, fn: Callable[[Tensor, Metric], Tensor]) -> Tensor:
        """Apply ``fn(rows, metric)`` chunk by chunk.

        Args:
            x: (B, T, D) rows, one per position.
            fn: Maps rows grouped as (B, N, C, D) and the metric of those N chunks (its
                tensors with their chunk axis) to (B, N, C, ...).

        Returns:
            (B, T, ...). A last chunk shorter than C is its own group, so that no padding
            is formed or multiplied.
        """
        if self.chunk is None:  # one chunk that spans the sequence
            return fn(x.unsqueeze(1), self._chunks(None)).squeeze(1)
        chunk, length = self.chunk, x.shape[1]
        whole = length // chunk  # chunks of C positions; a remainder forms chunk `whole`
        parts = []
        if whole:
            rows = x[:, : whole * chunk].unflatten(1, (whole, chunk))  # (B, N', C, D)
            parts.append(fn(rows, self._chunks(slice(0, whole))).flatten(1, 2))
        if whole * chunk < length:
            parts.append(fn(x[:, whole * chunk :].unsqueeze(1), self._chunks(slice(whole, whole + 1))).squeeze(1))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    def _chunks(self, index: slice | None) -> Metric:
        """The metric of some chunks, its tensors (B, N', ...); ``None``: the one metric of a
        sequence, given a chunk axis of 1."""
        tensors = (self.u, self.v, self.full, self.row_sums)
        if index is None:
            return Metric(*(None if t is None else t.unsqueeze(1) for t in tensors))
        return Metric(*(None if t is None else t[:, index] for t in tensors), chunk=self.chunk)

    def times_identity_plus(self, x: Tensor, *, transposed: bool) -> Tensor:
        """Right-multiply rows of ``x`` by ``I + A`` (or its transpose), A = U Vᵀ/√r or W,
        each row by the metric of its chunk.

        Costs O(T·D·r) at rank r: no D×D matrix is formed, per sequence or per chunk.

        Args:
            x: (B, T, D) rows, one per token.
            transposed: Multiply by ``(I + A)ᵀ`` instead of ``I + A``.

        Returns:
            (B, T, D).
        """

        def apply(rows: Tensor, metric: Metric) -> Tensor:  # rows: (B, N, C, D)
            if metric.full is not None:
                return rows + rows @ (metric.full.transpose(-1, -2) if transposed else metric.full)
            # x (I + U Vᵀ/√r) = x + (x U) Vᵀ/√r;  x (I + U Vᵀ/√r)ᵀ = x + (x V) Uᵀ/√r
            left, right = (metric.v, metric.u) if transposed else (metric.u, metric.v)
            coords = (rows @ left) / math.sqrt(left.shape[-1])  # (B, N, C, r): scaled here, where it is small
            return rows + coords @ right.transpose(-1, -2)  # (B, N, C, D)

        return self._grouped(x, apply)

    def row_sum_queries(self, x: Tensor, num_heads: int) -> Tensor:
        """Reference-mode queries ``Q̃_h = X_h m_h`` with ``m_h = Σ_j M_hj``, per chunk.

        Low rank: ``m_h = U_h (Σ_j V_j)ᵀ / √r``, applied as two thin products so that no
        d×d matrix is formed.

        Args:
            x: (B, T, D) raw input.
            num_heads: H.

        Returns:
            (B, T, H, d).
        """

        def apply(rows: Tensor, metric: Metric) -> Tensor:  # rows: (B, N, C, D)
            heads = rows.unflatten(-1, (num_heads, -1))  # (B, N, C, H, d)
            d = heads.shape[-1]
            if metric.u is None:
                blocks = metric.row_sums
                if blocks is None:
                    blocks = metric.full.unflatten(-2, (num_heads, d)).unflatten(-1, (num_heads, d)).sum(dim=-2)
                return torch.einsum("bnchi,bnhij->bnchj", heads, blocks)  # (B, N, C, H, d)
            rank = metric.u.shape[-1]
            u = metric.u.unflatten(-2, (num_heads, d))  # (B, N, H, d, r)
            v_sum = metric.v.unflatten(-2, (num_heads, d)).sum(dim=-3)  # (B, N, d, r)
            coords = torch.einsum("bnchi,bnhir->bnchr", heads, u) / math.sqrt(rank)  # (B, N, C, H, r)
            return torch.einsum("bnchr,bnjr->bnchj", coords, v_sum)  # (B, N, C, H, d)

        return self._grouped(x, apply)

    def at_positions(self, length: int) -> Metric:
        """The same metric with one entry per position (for reference implementations only).

        Args:
            length: Sequence length T.

        Returns:
            A metric whose tensors are (B, T, ...), or this metric when it has no chunks.
        """
        if self.chunk is None:
            return self
        index = torch.arange(length, device=self._any().device) // self.chunk  # (T,): each position's chunk
        tensors = (None if t is None else t[:, index] for t in (self.u, self.v, self.full, self.row_sums))
        return Metric(*tensors, chunk=1)

    def matrix(self, *, plus_identity: bool) -> Tensor:
        """The explicit D×D matrix (for reference implementations and analysis only).

        Args:
            plus_identity: Return ``I + A`` rather than ``A``.

        Returns:
            (B, [N,] D, D).

        Raises:
            ValueError: the metric holds only row sums.
        """
        if self.row_sums is not None:
            raise ValueError("this metric holds only the row sums of its blocks, not the D×D matrix")
        if self.full is not None:
            dense = self.full
        else:
            dense = self.u @ self.v.transpose(-1, -2) / math.sqrt(self.u.shape[-1])
        if plus_identity:
            dense = dense + torch.eye(dense.shape[-1], dtype=dense.dtype, device=dense.device)
        return dense

    def _any(self) -> Tensor:
        return next(t for t in (self.u, self.full, self.row_sums) if t is not None)


class MetricGenerator(nn.Module):
    """MLP from a context vector to a metric (``U, V`` factors or a full ``W``).

    Args:
        d_model: Model width D.
        rank: Rank r of ``U Vᵀ``, or ``"full"`` for all D² entries.
        widths: Hidden layers' widths of the MLP (GELU), first to last. Empty = a static
            metric: plain parameters, independent of the input.
        identity_start: Start with ``U = 0`` (or ``W = 0``) so that ``I + A = I``. The V
            part does not start at zero: with both at zero ``U Vᵀ`` would get no gradient.
        row_sum_heads: For the reference mode at full rank: H, so that the generator
            emits only the row sums ``m_h = Σ_j W_hj`` (H·d² values, not D²) by summing
            its last layer's weights over column blocks before applying them.
    """

    def __init__(
        self,
        d_model: int,
        *,
        rank: Rank,
        widths: tuple[int, ...],
        identity_start: bool,
        row_sum_heads: int | None = None,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.rank = rank
        self.depth = len(widths)
        self.row_sum_heads = row_sum_heads if rank == "full" else None
        out_features = d_model * d_model if rank == "full" else 2 * d_model * rank
        # Parameters are laid out [U (D·r) | V (D·r)] or [W (D·D)]; U (or W) comes first.
        first_part = d_model * d_model if rank == "full" else d_model * rank
        if not widths:
            self.static = nn.Parameter(torch.randn(out_features) / math.sqrt(d_model))
            self.hidden = None
            self.output = None
            if identity_start:
                with torch.no_grad():
                    self.static[:first_part].zero_()
        else:
            layers: list[nn.Module] = []
            fan_in = d_model
            for width in widths:
                layers += [nn.Linear(fan_in, width), nn.GELU()]
                fan_in = width
            self.static = None
            self.hidden = nn.Sequential(*layers)
            self.output = nn.Linear(fan_in, out_features)
            if identity_start:
                with torch.no_grad():
                    self.output.weight[:first_part].zero_()
                    self.output.bias[:first_part].zero_()

    def _row_sums(self, flat: Tensor) -> Tensor:
        """Sum W's entries (first axis, laid out as W's rows then columns) over column blocks:
        (D², ...) -> (H·d², ...)."""
        heads = self.row_sum_heads
        d = self.d_model // heads
        return flat.view(heads, d, heads, d, *flat.shape[1:]).sum(dim=2).reshape(heads * d * d, *flat.shape[1:])

    def forward(self, context: Tensor, *, dense: bool = False) -> Metric:
        """Generate the metric.

        Args:
            context: (B, D) or (B, N, D) context vectors.
            dense: Emit every entry of ``W`` even where only its row sums are needed
                (the explicit reference does, to check the summed path).

        Returns:
            The metric, with a chunk axis when ``context`` has one and depth > 0 (the
            caller sets ``chunk``).
        """
        summed = self.row_sum_heads is not None and not dense
        if self.static is not None:
            static = self._row_sums(self.static) if summed else self.static
            flat = static.expand(context.shape[0], -1)  # (B, out): same for every input
        else:
            hidden = self.hidden(context)  # (B, [N,] width)
            if summed:  # H·d² outputs instead of D²: the sum commutes with the linear layer
                flat = F.linear(hidden, self._row_sums(self.output.weight), self._row_sums(self.output.bias))
            else:
                flat = self.output(hidden)  # (B, [N,] out)
        lead = flat.shape[:-1]
        d = self.d_model
        if summed:
            heads = self.row_sum_heads
            return Metric(row_sums=flat.view(*lead, heads, d // heads, d // heads))
        if self.rank == "full":
            return Metric(full=flat.view(*lead, d, d))
        u, v = flat.view(*lead, 2, d, self.rank).unbind(dim=-3)  # (B, [N,] D, r) each
        return Metric(u=u, v=v)
