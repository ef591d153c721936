"""What a study's trials are judged by (its first objective), as the product shows it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import optuna
import pandas as pd

from storage import record
from studies.results.names import QUALITY_ATTRIBUTE


@dataclass(frozen=True)
class Quality:
    """A study's first objective (what its trials are judged by) as the product shows it.

    Attributes:
        column: The reported metric, and the trial frame's column holding it.
        maximize: Whether larger is better.
        label: Axis and table label (``validation accuracy``).
        short: One-line label (``acc``).
        unit: The unit of a difference between two values (``accuracy points``).
        percent: Values show as percentages and differences in points (×100).
        decimals: Decimals of a shown value or difference.
        test_column: The same metric on the held-out test split (``test_accuracy``), which
            judges; None when the study records none (a store this product did not write).
        margin: The equivalence margin of a comparison, in the values' own unit: two designs whose
            difference lies within ``±margin`` (two one-sided tests) are the same for this metric's
            purposes; None: no comparison is called the same (a metric this product does not know).
        margin_reason: Why that margin, in a sentence (docs/verdict.md shows it).
        bounds: The values' range where it is bounded (accuracy: 0 to 1): an interval of their mean
            is cut to it (``bounded``), since the mean cannot leave it; None: unbounded.
    """

    column: str
    maximize: bool
    label: str
    short: str
    unit: str
    percent: bool = False
    decimals: int = 3
    test_column: str | None = None
    margin: float | None = None
    margin_reason: str = ""
    bounds: tuple[float, float] | None = None

    def bounded(self, low: float, high: float) -> tuple[float, float]:
        """An interval of the mean cut to ``bounds``: a confidence interval intersected with the values'
        range keeps its coverage (the true mean lies in the range), and shows no impossible value."""
        if self.bounds is None or math.isnan(low):
            return low, high
        floor, ceiling = self.bounds
        return min(max(low, floor), ceiling), max(min(high, ceiling), floor)

    @property
    def test_label(self) -> str:
        """The label of the test metric: ``test accuracy``, ``test bits per byte``."""
        return self.label.replace("validation", "test", 1)

    @property
    def sign(self) -> float:
        """+1 or -1: the factor that turns a value into a score (larger is better)."""
        return 1.0 if self.maximize else -1.0

    def scaled(self, value: float) -> float:
        """A value or difference in the unit it is shown in (accuracy: percent or points)."""
        return 100 * value if self.percent else value

    def shown(self, value: float) -> str:
        """A value as reports write it: ``34.2%``, ``1.234``."""
        return f"{self.scaled(value):.{self.decimals}f}" + ("%" if self.percent else "")


QUALITIES = {
    quality.column: quality
    for quality in (
        Quality(
            record.ACCURACY,
            True,
            "validation accuracy",
            "acc",
            "accuracy points",
            percent=True,
            decimals=1,
            test_column=record.TEST_ACCURACY,
            bounds=(0.0, 1.0),
            margin=0.01,
            margin_reason=(
                "one accuracy point: less than any design choice here is worth (on lra_sharing's truth table the "
                "learning rate moves accuracy 3 to 5 points, the width 2.6 to 4.1, a data-adaptive generator 1.8 "
                "for the paper's metric), and about the seed-to-seed spread of one configuration's accuracy"
            ),
        ),
        Quality(
            "val_bits_per_byte",
            False,
            "validation bits per byte",
            "bpb",
            "bits per byte",
            test_column=record.TEST_BITS_PER_BYTE,
            margin=0.01,
            margin_reason=(
                "0.01 bits per byte: under 0.5% of the 2.9 to 3.5 bits per byte the quick models reach (docs/results.md)"
            ),
        ),
    )
}


def quality_of(study: optuna.Study) -> Quality:
    """The ``Quality`` of a study's first objective, from the metric name it recorded.

    A metric this product does not know is shown under its own name; a study without
    metric names that maximises is taken to be one of this product's accuracy studies.
    """
    maximize = study.directions[0] == optuna.study.StudyDirection.MAXIMIZE
    if study.metric_names is None:
        return QUALITIES[record.ACCURACY] if maximize else Quality("value", False, "objective value", "value", "")
    return quality_named(study.metric_names[0], maximize)


def quality_named(metric: str, maximize: bool) -> Quality:
    """The ``Quality`` of a metric: this product's own, or one shown under its name."""
    known = QUALITIES.get(metric)
    return known if known is not None and known.maximize == maximize else Quality(metric, maximize, metric, metric, "")


def quality(frame: pd.DataFrame) -> Quality:
    """The ``Quality`` a trial frame's values measure (accuracy for a frame not from ``trials_frame``)."""
    return frame.attrs.get(QUALITY_ATTRIBUTE, QUALITIES[record.ACCURACY])
