"""The report's tables: each family's front and the verdict's comparisons.

Each table has one set of rows and two forms: for reading (``fronts_frame``, ``verdict_frame``:
figures as the report shows them, which the HTML report and ``--markdown`` render) and for
analysis (``fronts_data``, ``verdict_data``: one quantity a column, numbers as numbers, which
``--csv`` writes).
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from storage import record
from studies.results import StudyResults
from studies.results.configurations import headline_value, knob_text, knobs_text
from studies.results.frame import compared_knobs, knob_columns, search_runs
from studies.results.fronts import family_fronts
from studies.results.quality import quality
from studies.results.verdict import Comparison, duplicates


def front_numbers(frame: pd.DataFrame) -> set[int]:
    """The trial numbers of the search runs on their family's Pareto front (seed repeats select nothing)."""
    if frame.empty:
        return set()
    searched = frame[search_runs(frame)]
    return set(searched[family_fronts(searched)]["number"]) if not searched.empty else set()


def _numbers_text(numbers: list[int]) -> str:
    """Trial numbers compactly: consecutive runs as ranges (``3-5, 9``)."""
    spans: list[list[int]] = []
    for number in sorted(numbers):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


HEADLINE_COLUMN = "headline: fresh-seed mean [95% CI]"


def fronts_frame(results: StudyResults) -> pd.DataFrame:
    """Each configuration on its family's front, or with fresh seeds: its headline figure (fresh-seed
    mean on the test split, 95% CI), the search run that chose it, its knobs and costs.

    Returns:
        One row per configuration, the baseline's first, then by family and FLOPs; a knob no row
        sets is no column. Empty when no trial completed.
    """
    keep = _front_rows(results)
    if keep.empty:
        return pd.DataFrame()
    measured = quality(results.configurations)
    knobs = compared_knobs(results.frame)
    rows = []
    for _, row in keep.iterrows():
        search = measured.scaled(row["search_value"])
        rows.append(
            {
                record.FAMILY: row[record.FAMILY] + (f": {row[record.POINT]}" if isinstance(row.get(record.POINT), str) else ""),
                HEADLINE_COLUMN: headline_value(row, measured),
                "fresh seeds": f"{row['seeds']} ({row['judged_on']})" if row["seeds"] else "0",
                f"search run ({measured.label})": f"{search:.{measured.decimals}f} (trial {row['number']})",
                **{name: knob_text(row.get(name)) for name in knobs},
                "FLOPs/example": f"{row[record.FLOPS]:.3g}",
                "parameters": _count(row[record.PARAMETERS]),
                "examples/s": "" if pd.isna(row[record.EXAMPLES_PER_S]) else f"{row[record.EXAMPLES_PER_S]:.0f}",
                "trials": _numbers_text(list(row["numbers"])),
            }
        )
    table = pd.DataFrame(rows)
    return table.loc[:, (table != "").any()]


def _front_rows(results: StudyResults) -> pd.DataFrame:
    """The configurations the fronts table shows: on their family's front, or with fresh seeds; the
    baseline's first, then by family and FLOPs."""
    configs = results.configurations
    if configs.empty:
        return configs
    on_front = front_numbers(results.frame)
    keep = configs[configs["numbers"].map(lambda numbers: bool(on_front & set(numbers))) | (configs["seeds"] > 0)]
    return keep.sort_values([record.BASELINE, record.FAMILY, record.FLOPS], ascending=[False, True, True])


def fronts_data(results: StudyResults) -> pd.DataFrame:
    """``fronts_frame``'s rows for analysis: one quantity a column, numbers as numbers (``--csv``).

    Returns:
        Columns ``family``, ``point``; ``mean``, ``ci_low``, ``ci_high`` (the headline figure, in the
        metric's own unit: accuracy as a fraction), ``fresh_seeds``, ``judged_on``; ``search_value``
        (the search run's validation value) and ``search_trial``; the knobs; ``flops_per_example``,
        ``parameters``, ``examples_per_s``; ``trials`` (the configuration's trial numbers, spaced).
    """
    keep = _front_rows(results)
    if keep.empty:
        return pd.DataFrame()
    knobs = compared_knobs(results.frame)
    return pd.DataFrame(
        {
            record.FAMILY: row[record.FAMILY],
            record.POINT: row.get(record.POINT) if isinstance(row.get(record.POINT), str) else None,
            "mean": row["mean"],
            "ci_low": row["ci_low"],
            "ci_high": row["ci_high"],
            "fresh_seeds": int(row["seeds"]),
            "judged_on": row["judged_on"] if row["seeds"] else None,
            "search_value": row["search_value"],
            "search_trial": int(row["number"]),
            **{name: row.get(name) for name in knobs},
            record.FLOPS: row[record.FLOPS],
            record.PARAMETERS: row[record.PARAMETERS],
            record.EXAMPLES_PER_S: row[record.EXAMPLES_PER_S],
            "trials": " ".join(str(number) for number in sorted(row["numbers"])),
        }
        for _, row in keep.iterrows()
    )


def _count(value: object) -> str:
    """A count compactly: 54.1k, 2.35M (blank where there is none)."""
    number = pd.to_numeric(value, errors="coerce")
    if pd.isna(number):
        return ""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(number) >= size:
            return f"{number / size:.3g}{suffix}"
    return f"{number:.0f}"


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
    for comparison in _said_once(results.verdict.comparisons):
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


GLANCE_COLUMNS = (
    "compared",
    "FLOPs ratio",
    "its figure",
    "baseline's figure",
    "judged on",
    "gap [95% CI]",
    "Holm-adjusted p",
    "answer",
)


def _judged_on(comparison: Comparison) -> str:
    """What the two figures measure: the split and the seeds (``test accuracy, 6 fresh seeds each``), or the
    search runs' validation values where no fresh seed was trained."""
    measured, candidate, baseline = comparison.quality, comparison.candidate, comparison.baseline
    if comparison.test is None:
        return f"{measured.label}, the selected search runs"
    split = measured.test_label if candidate["judged_on"] == "test" else measured.label
    seeds = {int(candidate["seeds"]), int(baseline["seeds"])}
    return f"{split}, {seeds.pop()} fresh seeds each" if len(seeds) == 1 else f"{split}, {min(seeds)}-{max(seeds)} fresh seeds"


def verdict_text(rows: list[dict[str, str]] | pd.DataFrame, indent: str = "  ") -> str:
    """The verdict table for a terminal: ``GLANCE_COLUMNS`` of its rows (``verdict_frame``'s, or as stored in a
    study's ``verdict_table`` attribute), left-aligned, one line each; empty when there are none."""
    table = pd.DataFrame(rows)
    if table.empty:
        return ""
    table = table[[column for column in GLANCE_COLUMNS if column in table.columns]]
    widths = {column: max(len(column), *(len(str(value)) for value in table[column])) for column in table.columns}
    lines = ["  ".join(column.ljust(widths[column]) for column in table.columns)]
    lines += ["  ".join(str(row[column]).ljust(widths[column]) for column in table.columns) for _, row in table.iterrows()]
    return "\n".join(indent + line.rstrip() for line in lines)


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


def verdict_data(results: StudyResults) -> pd.DataFrame:
    """``verdict_frame``'s rows for analysis: one quantity a column, numbers as numbers (``--csv``).

    Returns:
        Columns ``compared``, ``against``, ``against_trial``, ``flops_ratio``; ``candidate_mean``,
        ``candidate_low``, ``candidate_high`` and the same of ``baseline_`` (headline figures, in the
        metric's unit); ``difference``, ``difference_low``, ``difference_high`` (in the unit differences
        are shown in: accuracy points); ``test``, ``p_holm``, ``significant``; ``answer`` (better, worse,
        same, undetermined), ``margin`` (in the differences' unit), ``equivalence_p``, ``seeds_needed``.
    """
    rows = []
    for comparison in _said_once(results.verdict.comparisons):
        measured, candidate, baseline = comparison.quality, comparison.candidate, comparison.baseline
        low, high = comparison.interval
        rows.append(
            {
                "compared": comparison.family,
                "against": baseline[record.FAMILY],
                "against_trial": int(baseline["number"]),
                "flops_ratio": candidate[record.FLOPS] / baseline[record.FLOPS],
                **{
                    f"{side}_{name}": row[column]
                    for side, row in (("candidate", candidate), ("baseline", baseline))
                    for name, column in (("mean", "mean"), ("low", "ci_low"), ("high", "ci_high"))
                },
                "difference": comparison.difference,
                "difference_low": low,
                "difference_high": high,
                "test": comparison.test.name if comparison.test else None,
                "p_holm": comparison.adjusted_p,
                "significant": comparison.significant,
                "answer": comparison.answer,
                "margin": measured.scaled(measured.margin) if measured.margin is not None else math.nan,
                "equivalence_p": comparison.equivalence_p,
                "seeds_needed": comparison.seeds_needed,
            }
        )
    return pd.DataFrame(rows)


def _said_once(comparisons: tuple[Comparison, ...]) -> list[Comparison]:
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


def markdown(study_name: str, results: StudyResults) -> str:
    """The study's verdict (its table, then its sentence) and each family's front as one Markdown document."""
    verdict, fronts = verdict_frame(results), fronts_frame(results)
    parts = [f"# {study_name}", "", "## Verdict", "", verdict.to_markdown(index=False) if not verdict.empty else "(none)", ""]
    parts += [results.verdict.sentence, "", "## Each family's front", ""]
    parts += [fronts.to_markdown(index=False) if not fronts.empty else "(none)", ""]
    return "\n".join(parts)
