"""The one-screen summary printed at the end of a run."""

from __future__ import annotations

from pathlib import Path

import optuna

from reports.results import StudyResults
from reports.results.frame import knob_columns, search_runs
from reports.results.fronts import best, family_order
from reports.results.names import FLOPS, INFEASIBLE
from reports.results.quality import Quality, quality
from reports.results.verdict import VERDICT_ATTRIBUTE


def _trial(row, knobs: list[str], measured: Quality) -> str:
    """A trial in one line: number, first objective (``acc``, ``bpb``), FLOPs and its knobs (``attention`` aside)."""
    shown = " ".join(f"{name}={row[name]}" for name in knobs if name != "attention" and row.get(name) is not None)
    return f"trial {row['number']}  {measured.short} {row[measured.column]:.3f}  {row[FLOPS]:.3g} FLOPs  {shown}"


def summary(study: optuna.Study, storage_url: str, report: Path, results: StudyResults | None = None) -> str:
    """Trials by state, the study's verdict (its ``verdict`` attribute, which the run writes first: the
    report's headline), each family's best search trial (the one its seed repeats measure again,
    ``reports.results.fronts.best``), and where things are."""
    frame = (results or StudyResults.read(study)).frame
    knobs = knob_columns(frame)
    lines = [f"\n{study.study_name}"]
    if frame.empty:
        return "\n".join([*lines, "  no trials"])
    counts = frame["state"].value_counts()
    lines.append(
        "  trials: " + ", ".join(f"{counts.get(s, 0)} {s.lower()}" for s in ("COMPLETE", "PRUNED", "FAIL", INFEASIBLE, "RUNNING"))
    )
    lines.append(f"  verdict: {study.user_attrs[VERDICT_ATTRIBUTE]}")  # written by the run just before
    searched = frame[(frame["state"] == "COMPLETE") & search_runs(frame)]
    for family in family_order(frame):
        complete = searched[searched["family"] == family]
        found = _trial(best(complete), knobs, quality(frame)) if not complete.empty else "none completed"
        lines.append(f"  best {family} in the search: {found}")
    failed = frame[frame["state"].isin(["FAIL", INFEASIBLE])]
    for _, row in failed.head(3).iterrows():
        lines.append(f"  failed trial {row['number']}: {str(row['error']).splitlines()[0]}")
    lines.append(f"  store:  {storage_url}  (browse: optuna-dashboard {storage_url})")
    lines.append(f"  report: {report}")
    return "\n".join(lines)
