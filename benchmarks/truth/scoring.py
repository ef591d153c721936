"""How a replayed study is scored against its truth: its verdict's agreement, comparison by comparison, and the
hypervolume its search covers over time."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from benchmarks.truth.truth import variant_key
from storage import record
from studies.results.verdict import Comparison, Headline


def configuration_of(family: str, values: Mapping[str, Any], knobs: list[str]) -> tuple:
    """A configuration's key: its family, then its knob values (None where a knob does not exist, NaN too)."""
    return (family, *(None if (value := values.get(name)) is None or value != value else value for name in knobs))


def keyed_configurations(configs: pd.DataFrame, knobs: list[str]) -> dict[tuple, pd.Series]:
    """Configurations by their key (``configuration_of``)."""
    return {configuration_of(row[record.FAMILY], row, knobs): row for _, row in configs.iterrows()}


def hypervolume(points: list[tuple[float, float]], reference: tuple[float, float]) -> float:
    """The area that ``(accuracy, flops)`` points dominate (accuracy up, FLOPs down) above ``reference``'s
    accuracy and below its FLOPs."""
    floor, ceiling = reference
    area, best = 0.0, floor
    for accuracy, flops in sorted(points, key=lambda point: point[1]):  # cheapest first
        if accuracy > best and flops < ceiling:
            area += (accuracy - best) * (ceiling - flops)
            best = accuracy
    return area


@dataclass(frozen=True)
class Agreement:
    """How a replayed verdict agrees with the truth, comparison by comparison.

    Attributes:
        agrees: Every comparison the truth makes has the same direction and the same significance.
        per_label: For each compared family or named point, whether it agrees.
        concludes: For each, whether it reaches the truth's conclusion: the same significance, and
            where the truth's difference is significant, the same direction too (the sign of a
            difference the test cannot tell from zero is not part of the answer a reader takes).
        regret: For each, the true test accuracy (points) of the truth's selected configuration less the replay's.
        sign: For each, whether its difference has the truth's sign (what counts where the truth's sign
            is stable: ``benchmarks.truth.stability``).
    """

    agrees: bool
    per_label: dict[str, bool]
    concludes: dict[str, bool]
    regret: dict[str, float]
    sign: dict[str, bool] = field(default_factory=dict)

    @property
    def concludes_alike(self) -> bool:
        """Every comparison reaches the truth's conclusion."""
        return all(self.concludes.values())


def agreement(
    truth: Headline,
    replayed: Headline,
    configs: pd.DataFrame,
    knobs: list[str],
    variants: Mapping[tuple, Comparison] | None = None,
) -> Agreement:
    """Score a replay's verdict against the true verdict (``benchmarks.truth.truth.true_verdict``).

    Args:
        truth: The true verdict.
        replayed: The replay's verdict (or a reference protocol's).
        configs: ``configurations(table)``: the true value of every configuration.
        knobs: The table's knob columns.
        variants: ``benchmarks.truth.truth.point_truths``: a named point's comparison is scored against
            the truth's of the variant the replay trained (else against the truth's own pick).
    """
    true_values = {key: float(row[record.TEST_ACCURACY]) for key, row in keyed_configurations(configs, knobs).items()}
    found = {comparison.family: comparison for comparison in replayed.comparisons}
    per_label, concludes, regret, sign = {}, {}, {}, {}
    for expected in truth.comparisons:
        label = expected.family
        got = found.get(label)
        if got is not None and got.pairing.point and variants:
            expected = variants.get(variant_key(label, got.candidate, knobs), expected)
        per_label[label] = got is not None and same_answer(expected, got)
        concludes[label] = got is not None and same_conclusion(expected, got)
        sign[label] = got is not None and _same_direction(expected, got)
        if got is not None:
            chosen = configuration_of(got.candidate[record.FAMILY], got.candidate, knobs)
            best = configuration_of(expected.candidate[record.FAMILY], expected.candidate, knobs)
            regret[label] = 100 * (true_values.get(best, math.nan) - true_values.get(chosen, math.nan))
    return Agreement(all(per_label.values()), per_label, concludes, regret, sign)


def _same_direction(expected: Comparison, got: Comparison) -> bool:
    """The differences have the same sign."""
    return math.copysign(1, expected.difference) == math.copysign(1, got.difference)


def same_answer(expected: Comparison, got: Comparison) -> bool:
    """The same direction and the same significance."""
    return _same_direction(expected, got) and expected.significant == got.significant


def same_conclusion(expected: Comparison, got: Comparison) -> bool:
    """The same three-way answer (``Comparison.answer``: better, worse, the same within the margin, or
    undetermined): the sign of a difference the tests cannot place is not part of the answer a reader takes."""
    return expected.answer == got.answer


def hours_to(curve: list[tuple[float, float]], share: float) -> float:
    """The device-hours after which the found share first reaches ``share`` (inf: never)."""
    return next((hours for hours, found in curve if found >= share), math.inf)


def area_under(curve: list[tuple[float, float]], horizon: float) -> float:
    """The found share's mean over ``[0, horizon]`` device-hours (a step function; 0 before the first trial ends)."""
    area, previous_hours, previous_share = 0.0, 0.0, 0.0
    for hours, share in curve:
        hours = min(hours, horizon)
        area += (hours - previous_hours) * previous_share
        previous_hours, previous_share = hours, share
        if hours >= horizon:
            break
    area += max(horizon - previous_hours, 0.0) * previous_share
    return area / horizon
