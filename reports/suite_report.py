"""A suite's report: each family's best configuration on every task, and the cross-task average,
as LRA reports it; each task's verdict beside it, and links to the tasks' own reports.

A cell is the family's best configuration in the search (the one its fresh seeds trained
again: ``studies.results.fronts.best`` by search score), valued over its fresh seeds with a 95%
t-interval; without two fresh seeds, the selected single run itself, marked uncorrected.
"""

from __future__ import annotations

import html
import math

import numpy as np
import optuna
import pandas as pd

from reports.html import STYLE
from storage import masked_url, record
from studies.results.configurations import configurations
from studies.results.frame import knob_columns
from studies.results.fronts import best, family_order
from studies.results.quality import quality
from studies.results.statistics import mean_interval

UNCORRECTED = "†"  # a selected single run: no fresh seeds to value it on


def suite_cells(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per family and task with a complete configuration.

    Args:
        frames: ``studies.results.frame.trials_frame`` of each task's study, by task.

    Returns:
        Columns ``family``, ``baseline``, ``task``, ``value``, ``ci_low``, ``ci_high``,
        ``seeds`` (fresh seeds valued; 0: the selected run alone), ``flops``, ``number``
        (the search trial that selected it).
    """
    rows = []
    for task, frame in frames.items():
        configs = configurations(frame, knob_columns(frame))
        for family, group in configs.groupby(record.FAMILY, sort=False) if not configs.empty else ():
            chosen = best(group, "search_score")
            fresh = np.array(list(chosen["fresh"].values()), dtype=float)
            if len(fresh) >= 2:
                value, (low, high), seeds = float(fresh.mean()), mean_interval(fresh), len(fresh)
            else:
                value, low, high, seeds = float(chosen["search_value"]), math.nan, math.nan, 0
            rows.append(
                {
                    record.FAMILY: family,
                    record.BASELINE: bool(chosen[record.BASELINE]),
                    "task": task,
                    "value": value,
                    "ci_low": low,
                    "ci_high": high,
                    "seeds": seeds,
                    "flops": float(chosen[record.FLOPS]),
                    "number": int(chosen["number"]),
                }
            )
    return pd.DataFrame(
        rows, columns=[record.FAMILY, record.BASELINE, "task", "value", "ci_low", "ci_high", "seeds", "flops", "number"]
    )


def averages(cells: pd.DataFrame, tasks: list[str]) -> dict[str, float]:
    """Each family's mean over the tasks, for the families with a value on every task (as LRA's "Avg")."""
    means = {}
    for family, group in cells.groupby(record.FAMILY, sort=False):
        if set(group["task"]) >= set(tasks):
            means[family] = float(group["value"].mean())
    return means


def _families(frames: dict[str, pd.DataFrame]) -> list[str]:
    """The families of every task, the baseline first, in the order their trials came."""
    return list(dict.fromkeys(family for frame in frames.values() if not frame.empty for family in family_order(frame)))


def suite_lines(frames: dict[str, pd.DataFrame]) -> list[str]:
    """The suite's answer for a terminal: each family's value per task, and its average.

    Args:
        frames: ``studies.results.frame.trials_frame`` of each task's study, by task.
    """
    cells, families = suite_cells(frames), _families(frames)
    lines = []
    for task, frame in frames.items():
        measured = quality(frame)
        found = cells[cells["task"] == task].set_index(record.FAMILY)
        shown = [f"{f} {measured.shown(found.loc[f, 'value'])}" for f in families if f in found.index]
        lines.append(f"  {task}: {', '.join(shown) or 'no complete configuration'}")
    mean = averages(cells, list(frames))
    measured = quality(next(iter(frames.values())))
    lines.append("  average over the tasks: " + (", ".join(f"{f} {measured.shown(v)}" for f, v in mean.items()) or "none yet"))
    return lines


def suite_html(
    name: str,
    question: str,
    stores: dict[str, optuna.Study],
    frames: dict[str, pd.DataFrame],
    storage_url: str,
    links: dict[str, str],
) -> str:
    """The suite's page.

    Args:
        name: The suite's report name.
        question: What the suite asks.
        stores: Each task's study, by task, in the table's order.
        frames: ``studies.results.frame.trials_frame`` of each of them, by task.
        storage_url: Where they were read (shown with any password masked).
        links: Each task's own report, as a link from this page.
    """
    cells, families, tasks = suite_cells(frames), _families(frames), list(frames)
    by_cell = cells.set_index([record.FAMILY, "task"])
    measured = quality(next(iter(frames.values())))
    same_metric = all(quality(frame) == measured for frame in frames.values())
    mean = averages(cells, tasks) if same_metric else {}

    def cell(family: str, task: str) -> str:
        if (family, task) not in by_cell.index:
            return "–"
        row = by_cell.loc[(family, task)]
        text = measured.shown(row["value"])
        if row["seeds"] == 0:
            return text + UNCORRECTED
        if math.isnan(row["ci_low"]):
            return text
        low, high = (f"{measured.scaled(row[end]):.{measured.decimals}f}" for end in ("ci_low", "ci_high"))
        return f"{text} [{low}, {high}]"

    table = pd.DataFrame(
        [
            {
                record.FAMILY: family,
                **{task: cell(family, task) for task in tasks},
                "average": measured.shown(mean[family]) if family in mean else "–",
            }
            for family in families
        ]
    )

    def flops(family: str, task: str) -> str:
        return f"{by_cell.loc[(family, task), 'flops']:.3g}" if (family, task) in by_cell.index else "–"

    flops_table = pd.DataFrame([{record.FAMILY: family, **{task: flops(family, task) for task in tasks}} for family in families])
    verdicts = "".join(
        f'<li><a href="{html.escape(links[task])}">{html.escape(task)}</a>: '
        f"{html.escape(str(store.user_attrs.get(record.VERDICT, 'no verdict yet')))}</li>"
        for task, store in stores.items()
    )
    missing = [family for family in families if family not in mean]
    caveats = []
    if missing:
        caveats.append(f"No average for {', '.join(missing)}: a task without a complete configuration of it.")
    if (cells["seeds"] == 0).any():
        caveats.append(f"{UNCORRECTED} the selected single run, uncorrected for selection: rerun with --repeat-seeds 3.")
    if not same_metric:
        caveats.append("The tasks measure different objectives: no average.")
    provenance = {
        "store": masked_url(storage_url),
        **{f"{task} study": f"{store.study_name} ({len(frames[task])} trials)" for task, store in stores.items()},
        "optuna": optuna.__version__,
    }
    provenance_rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in provenance.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(name)}</title><style>{STYLE}</style></head><body>
<h1>{html.escape(name)}</h1>
<p class="question">{html.escape(question)}</p>
<h2>Each family's best configuration per task ({html.escape(measured.label)}{", %" if measured.percent else ""})</h2>
<p>Mean and 95% t-interval over the configuration's fresh seeds; the average is over the tasks, as LRA reports it.</p>
{table.to_html(index=False, escape=True)}
{"".join(f"<p>{html.escape(c)}</p>" for c in caveats)}
<h2>Forward FLOPs per example of those configurations</h2>
{flops_table.to_html(index=False, escape=True)}
<h2>Verdict per task</h2><ul>{verdicts}</ul>
<h2>Provenance</h2><table>{provenance_rows}</table>
</body></html>
"""
