"""The one-screen summary printed at the end of a run."""

from __future__ import annotations

from pathlib import Path

import optuna

from reports.analysis import verdict
from storage.trials import ACCURACY, FLOPS, INFEASIBLE, knob_columns, trials_frame


def _trial(row, knobs: list[str]) -> str:
    """A trial in one line: number, accuracy, FLOPs and its knobs (``attention`` aside)."""
    shown = " ".join(f"{name}={row[name]}" for name in knobs if name != "attention" and row.get(name) is not None)
    return f"trial {row['number']}  acc {row[ACCURACY]:.3f}  {row[FLOPS]:.3g} FLOPs  {shown}"


def summary(study: optuna.Study, storage_url: str, report: Path) -> str:
    """Trials by state, the study's verdict (the report's headline), each family's best trial, and where things are."""
    frame = trials_frame(study)
    knobs = knob_columns(frame)
    lines = [f"\n{study.study_name}"]
    if frame.empty:
        return "\n".join([*lines, "  no trials"])
    counts = frame["state"].value_counts()
    lines.append(
        "  trials: " + ", ".join(f"{counts.get(s, 0)} {s.lower()}" for s in ("COMPLETE", "PRUNED", "FAIL", INFEASIBLE, "RUNNING"))
    )
    lines.append(f"  verdict: {verdict(frame).sentence}")
    for family, group in frame.sort_values("baseline", ascending=False, kind="stable").groupby("family", sort=False):
        complete = group[group["state"] == "COMPLETE"]
        best = _trial(complete.sort_values(ACCURACY).iloc[-1], knobs) if not complete.empty else "none completed"
        lines.append(f"  best {family}: {best}")
    failed = frame[frame["state"].isin(["FAIL", INFEASIBLE])]
    for _, row in failed.head(3).iterrows():
        lines.append(f"  failed trial {row['number']}: {str(row['error']).splitlines()[0]}")
    lines.append(f"  store:  {storage_url}  (browse: optuna-dashboard {storage_url})")
    lines.append(f"  report: {report}")
    return "\n".join(lines)
