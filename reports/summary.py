"""The one-screen summary printed at the end of a run."""

from __future__ import annotations

import shlex
from pathlib import Path

import optuna
import pandas as pd

from reports.tables import verdict_text
from storage import record
from studies.results import StudyResults
from studies.results.configurations import headline_figure, knobs_text
from studies.results.frame import knob_columns
from studies.results.names import INFEASIBLE
from studies.results.quality import Quality, quality
from studies.results.verdict import provisional
from studies.results.verdict_table import verdict_frame


def _configuration(row: pd.Series, knobs: list[str], measured: Quality) -> str:
    """A compared configuration in one line: family, its headline figure, its search run, FLOPs, knobs."""
    shown = knobs_text(row, knobs)
    point = f" ({row[record.POINT]})" if isinstance(row.get(record.POINT), str) else ""
    search = f"search run {row['number']}: {measured.shown(row['search_value'])} {measured.label}"
    return f"{row[record.FAMILY]}{point}: {headline_figure(row, measured)}; {search}; {row[record.FLOPS]:.3g} FLOPs; {shown}"


def summary(study: optuna.Study, storage_url: str, report: Path, results: StudyResults | None = None) -> str:
    """Trials by state, the study's verdict (its ``verdict`` attribute, which the run writes first: the
    report's headline), each configuration the verdict compares with its headline figure, and where things are."""
    results = results or StudyResults.read(study)
    frame = results.frame
    knobs = knob_columns(frame)
    lines = [f"\n{study.study_name}"]
    if frame.empty:
        return "\n".join([*lines, "  no trials"])
    counts = frame["state"].value_counts()
    lines.append(
        "  trials: " + ", ".join(f"{counts.get(s, 0)} {s.lower()}" for s in ("COMPLETE", "PRUNED", "FAIL", INFEASIBLE, "RUNNING"))
    )
    lines.append("  verdict:")
    if table := verdict_text(verdict_frame(results), indent="    "):
        lines.append(table)
    if note := provisional(frame):
        lines.append(f"    {note}")
    lines.append(f"    {study.user_attrs.get(record.VERDICT, results.verdict.sentence)}")
    if reliability := study.user_attrs.get(record.RELIABILITY):
        lines.append(f"  {reliability}")
    compared = [row for c in results.verdict.comparisons for row in (c.baseline, c.candidate)]
    if compared:
        lines.append("  compared:")
        for row in {row["config"]: row for row in compared}.values():
            lines.append(f"    {_configuration(row, knobs, quality(frame))}")
    failed = frame[frame["state"].isin(["FAIL", INFEASIBLE])]
    for _, row in failed.head(3).iterrows():
        lines.append(f"  failed trial {row['number']}: {str(row[record.ERROR]).splitlines()[0]}")
    lines.append(f"  store:  {storage_url}  (browse: optuna-dashboard {shlex.quote(storage_url)})")  # to paste in a shell
    lines.append(f"  report: {report}")
    return "\n".join(lines)
