"""What every attention family's knobs dataclass provides: a shape check, the layer's
keyword arguments, and the layer's analytic FLOPs (beside the math they count)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trainers.attention.sdpa import check_heads
from trainers.knob_declarations import knob_fields, spec_of


@dataclass(frozen=True, kw_only=True)
class AttentionKnobs:
    """Base of a family's knobs dataclass (``MHAKnobs``, ``DAMCHAKnobs``, the cross-head
    baselines' ``THAKnobs`` ...). Its knob fields are declared with ``trainers.knob_declarations.knob``.

    Attributes:
        POSITIVE_INTEGERS: The knobs whose values must be integers >= 1.
    """

    POSITIVE_INTEGERS: ClassVar[tuple[str, ...]] = ()

    def check(self, *, d_model: int, num_heads: int, num_layers: int | None = None) -> None:
        """Check the knobs against the model's shape: the heads split ``d_model``, and each of
        ``POSITIVE_INTEGERS`` is an integer >= 1.

        Args:
            d_model: Model width.
            num_heads: Head count.
            num_layers: Layers in the stack (None: a lone layer).

        Raises:
            ValueError: naming the knob, its value and what is allowed.
        """
        check_heads(d_model, num_heads)
        for name in self.POSITIVE_INTEGERS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be an integer >= 1")

    def layer_arguments(self) -> dict[str, object]:
        """The knobs the family's layer constructor takes, by name."""
        return {f.name: getattr(self, f.name) for f in knob_fields(self) if spec_of(f).layer_argument}

    def layer_flops(self, *, length: int, d_model: int, num_heads: int) -> tuple[int, int]:
        """Forward FLOPs of one layer on one sequence, counted as ``trainers.costs`` counts them.

        Args:
            length: Positions T.
            d_model: Model width D.
            num_heads: Head count H.

        Returns:
            (dense, attention core): every matrix product except the fused SDPA calls, and
            those calls over their full T×T scores.
        """
        raise NotImplementedError(f"{type(self).__name__} does not state its FLOPs")
