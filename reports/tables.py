"""The report's tables: each family's front and the verdict's comparisons.

Each table has one set of rows and two forms: for reading (``fronts_frame``, and the verdict's
``studies.results.verdict_table.verdict_frame``, which the store keeps too: figures as the report shows
them, which the HTML report and ``--markdown`` render) and for analysis (``fronts_data``, ``verdict_data``:
one quantity a column, numbers as numbers, which ``--csv`` writes).
"""

from __future__ import annotations

import math

import pandas as pd

from storage import record
from studies.results import StudyResults
from studies.results.configurations import headline_value, knob_text
from studies.results.frame import compared_knobs, search_runs
from studies.results.fronts import family_fronts
from studies.results.quality import quality
from studies.results.verdict_table import said_once, verdict_frame


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
    for comparison in said_once(results.verdict.comparisons):
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


def markdown(study_name: str, results: StudyResults) -> str:
    """The study's verdict (its table, then its sentence) and each family's front as one Markdown document."""
    verdict, fronts = verdict_frame(results), fronts_frame(results)
    parts = [f"# {study_name}", "", "## Verdict", "", verdict.to_markdown(index=False) if not verdict.empty else "(none)", ""]
    parts += [results.verdict.sentence, "", "## Each family's front", ""]
    parts += [fronts.to_markdown(index=False) if not fronts.empty else "(none)", ""]
    return "\n".join(parts)
