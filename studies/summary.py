"""The one-screen summary printed at the end of a run."""

from __future__ import annotations

from pathlib import Path

import optuna

from storage.trials import ACCURACY, FLOPS, INFEASIBLE, beats_baselines, knob_columns, trials_frame


def _trial(row, knobs: list[str]) -> str:
    """A trial in one line: number, accuracy, FLOPs and its knobs (``attention`` aside)."""
    shown = " ".join(f"{name}={row[name]}" for name in knobs if name != "attention" and row.get(name) is not None)
    return f"trial {row['number']}  acc {row[ACCURACY]:.3f}  {row[FLOPS]:.3g} FLOPs  {shown}"


def summary(study: optuna.Study, storage_url: str, report: Path) -> str:
    """Trials by state, the best baseline, the DAMCHA configurations that beat MHA per FLOP, and where things are."""
    frame = trials_frame(study)
    knobs = knob_columns(frame)
    lines = [f"\n{study.study_name}"]
    if frame.empty:
        return "\n".join([*lines, "  no trials"])
    counts = frame["state"].value_counts()
    lines.append(
        "  trials: " + ", ".join(f"{counts.get(s, 0)} {s.lower()}" for s in ("COMPLETE", "PRUNED", "FAIL", INFEASIBLE, "RUNNING"))
    )
    complete_baselines = frame[frame["baseline"] & (frame["state"] == "COMPLETE")]
    if complete_baselines.empty:
        lines.append("  best MHA baseline: none completed")
    else:
        best = complete_baselines.sort_values(ACCURACY).iloc[-1]
        lines.append(f"  best MHA baseline: {_trial(best, knobs)}")
    winners = beats_baselines(frame)
    lines.append("  DAMCHA on the Pareto front, matching or beating MHA at lower or equal FLOPs:")
    if winners.empty:
        lines.append("    none")
    for _, row in winners.iterrows():
        lines.append(f"    {_trial(row, knobs)}  (vs baseline trial {row['matched_baseline']})")
    failed = frame[frame["state"].isin(["FAIL", INFEASIBLE])]
    for _, row in failed.head(3).iterrows():
        lines.append(f"  failed trial {row['number']}: {str(row['error']).splitlines()[0]}")
    lines.append(f"  store:  {storage_url}  (browse: optuna-dashboard {storage_url})")
    lines.append(f"  report: {report}")
    return "\n".join(lines)
