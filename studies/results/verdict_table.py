"""The verdict as a table of text, a row per comparison: what the store keeps beside the verdict's sentence (the
engine writes it when a run ends) and what every view of the verdict shows (the report, the summary,
``reports list``). Its figures are the verdict's, formatted; nothing here is computed anew."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from storage import record
from studies.results import StudyResults
from studies.results.configurations import headline_value, knobs_text
from studies.results.frame import knob_columns
from studies.results.verdict import Comparison, duplicates


def _number(value: float, decimals: int) -> str:
    return "" if math.isnan(value) else f"{value:+.{decimals}f}"


def verdict_frame(results: StudyResults) -> pd.DataFrame:
    """The verdict as a table, one row per comparison: what was compared at what cost, both figures, the gap with
    its interval, the adjusted p and the answer in words. The report, the run's summary and ``reports list``
    open with it; the sentence follows for those who want it.

    Returns:
        Columns ``compared`` (family or named point), ``configuration`` (its knobs), ``against`` (the
        baseline's family and trial), ``FLOPs ratio``, ``its figure`` and ``baseline's figure`` (headline
        figures' numbers: fresh-seed mean [95% CI]), ``judged on`` (their split and seeds), ``gap [95% CI]`` (in
        accuracy points or the metric's unit), ``Holm-adjusted p``, ``test`` and ``answer`` (``answer_in_words``). Empty when the
        verdict compares nothing (its sentence says why).
    """
    knobs = knob_columns(results.frame)
    rows = []
    for comparison in said_once(results.verdict.comparisons):
        measured, candidate, baseline = comparison.quality, comparison.candidate, comparison.baseline
        low, high = comparison.interval
        decimals = measured.decimals
        gap = _number(comparison.difference, decimals)
        rows.append(
            {
                "compared": comparison.family,
                "configuration": knobs_text(candidate, knobs),
                "against": f"{baseline[record.FAMILY]} (trial {baseline['number']})",
                "FLOPs ratio": f"{candidate[record.FLOPS] / baseline[record.FLOPS]:.2f}",
                "its figure": headline_value(candidate, measured),
                "baseline's figure": headline_value(baseline, measured),
                "judged on": _judged_on(comparison),
                "gap [95% CI]": gap if math.isnan(low) else f"{gap} [{low:+.{decimals}f}, {high:+.{decimals}f}]",
                "Holm-adjusted p": "" if math.isnan(comparison.adjusted_p) else f"{comparison.adjusted_p:.3g}",
                "test": comparison.test.name if comparison.test else "none: no fresh seeds (search runs, uncorrected)",
                "answer": answer_in_words(comparison),
            }
        )
    return pd.DataFrame(rows)


def _judged_on(comparison: Comparison) -> str:
    """What the two figures measure: the split and the seeds (``test accuracy, 6 fresh seeds each``), or the
    search runs' validation values where no fresh seed was trained."""
    measured, candidate, baseline = comparison.quality, comparison.candidate, comparison.baseline
    if comparison.test is None:
        return f"{measured.label}, the selected search runs"
    split = measured.test_label if candidate["judged_on"] == "test" else measured.label
    seeds = {int(candidate["seeds"]), int(baseline["seeds"])}
    return f"{split}, {seeds.pop()} fresh seeds each" if len(seeds) == 1 else f"{split}, {min(seeds)}-{max(seeds)} fresh seeds"


def answer_in_words(comparison: Comparison) -> str:
    """A comparison's answer as a reader wants it: ``better``, ``worse``, ``the same within ±1.0 points``, or
    ``undetermined`` with the seeds that would decide it (or why nothing was tested)."""
    measured = comparison.quality
    if comparison.test is None:
        return "undetermined: no fresh seeds, search runs only"
    if comparison.answer in ("better", "worse"):
        return comparison.answer
    unit = "points" if measured.percent else measured.unit
    margin = None if measured.margin is None else f"±{measured.scaled(measured.margin):.{measured.decimals}f} {unit}"
    if comparison.answer == "same":
        return f"the same within {margin}"
    needed = comparison.seeds_needed
    if needed:
        return f"undetermined: about {needed} seeds in all would decide it"
    return "undetermined" if margin is None else f"undetermined: neither a difference nor the same within {margin}"


def said_once(comparisons: tuple[Comparison, ...]) -> list[Comparison]:
    """The comparisons a table shows: a named point that is its family's selected configuration joins that
    family's row (its label added) instead of repeating it."""
    kept: list[Comparison] = []
    for comparison in comparisons:
        if (same := next((k for k in kept if duplicates(comparison, k)), None)) is not None:
            kept[kept.index(same)] = dataclasses.replace(
                same, pairing=dataclasses.replace(same.pairing, label=f"{same.pairing.label} = {comparison.pairing.label}")
            )
            continue
        kept.append(comparison)
    return kept
