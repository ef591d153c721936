"""The study report: one self-contained HTML file that answers the study's question at a glance.

Sections: question and settings with the verdict, one Pareto front per family against
FLOPs, parameters and measured time, knob effects, learning curves, knob importances,
each family's budget, the table of each family's front (mean ± 95% CI over seeds), and
provenance. Every string from the store is HTML-escaped.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Literal

import optuna
import pandas as pd
import plotly.graph_objects as go

from common.outputs import write_atomically
from reports.figures import (
    SECONDS_PER_1K,
    compare_figure,
    curves_figure,
    families,
    importance_figure,
    knob_effects_figure,
    pareto_figure,
    with_time_column,
)
from reports.tables import front_numbers, fronts_frame
from storage import masked_url, record
from studies.results import StudyResults
from studies.results.configurations import headline_figure
from studies.results.details import importances, learning_curves, provenance
from studies.results.frame import compared_knobs, knob_columns, search_runs
from studies.results.fronts import family_budgets
from studies.results.quality import quality
from studies.results.verdict import provisional
from studies.results.verdict_table import verdict_frame

PlotlyJs = Literal["inline", "cdn"]
STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1320px;padding:0 1em;color:#222}
h1{font-size:1.6em} h2{margin-top:1.6em;border-bottom:1px solid #ddd}
.headline{font-size:1.2em;background:#f3f7fb;border-left:4px solid #1f77b4;padding:.7em 1em}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}
td,th{padding:3px 10px;border-bottom:1px solid #e5e5e5;text-align:left}
.question{white-space:pre-line}
.wide{overflow-x:auto} .wide table{font-size:.8em} .wide td,.wide th{padding:3px 6px}
"""


def _table(rows: dict[str, object]) -> str:
    """A two-column table; a value that is itself a mapping is a table in its cell, a list is comma-joined."""
    cells = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{_cell(v)}</td></tr>" for k, v in rows.items())
    return f"<table>{cells}</table>"


def _cell(value: object) -> str:
    """A setting's value as escaped HTML, readable: no JSON."""
    if isinstance(value, dict):
        return _table(value) if value else "-"
    if isinstance(value, list | tuple):
        return html.escape(", ".join(map(_cell, value))) if value else "-"
    if isinstance(value, float):  # a reader's number, not a float's every digit
        return f"{value:.4g}"
    return html.escape("-" if value is None else str(value))


def _figures_html(figures: list[tuple[str, go.Figure]], plotlyjs: PlotlyJs) -> list[str]:
    """Each figure as a div; plotly.js embedded once (inline) or linked (cdn)."""
    parts = []
    for index, (div_id, figure) in enumerate(figures):
        include = ("cdn" if plotlyjs == "cdn" else True) if index == 0 else False
        parts.append(figure.to_html(include_plotlyjs=include, full_html=False, div_id=div_id, config={"displaylogo": False}))
    return parts


def table_html(table: pd.DataFrame, empty: str) -> str:
    """A table frame as escaped HTML, or ``empty`` (a sentence) when it has no rows."""
    if table.empty:
        return f"<p>{html.escape(empty)}</p>"
    # a header may break after an underscore or a slash (generator_depth, FLOPs/example): the table fits the page
    return re.sub(
        r"<th>(.*?)</th>",
        lambda m: "<th>" + m[1].replace("_", "_<wbr>").replace("/", "/<wbr>") + "</th>",
        table.to_html(index=False, escape=True, na_rep=""),
    )


def report_html(
    study: optuna.Study, storage_url: str, *, plotlyjs: PlotlyJs = "inline", results: StudyResults | None = None
) -> tuple[str, dict[str, go.Figure]]:
    """The page, and its figures by id (for static images).

    Args:
        study: The study, from any Optuna storage.
        storage_url: Where it was read (shown with any password masked).
        plotlyjs: ``inline`` (works offline, ~5 MB) or ``cdn`` (small, needs the internet).
        results: Its results, when the caller has read them already (else read here).
    """
    if _foreign(study):
        return foreign_report_html(study, storage_url, plotlyjs=plotlyjs)
    results = results or StudyResults.read(study)
    frame, configs, answer = with_time_column(results.frame), results.configurations, results.verdict
    knobs, measured = knob_columns(frame), quality(frame)
    what = measured.label[0].upper() + measured.label[1:]
    searched_knobs = set(study.user_attrs.get(record.SEARCH_SPACE) or knobs)  # a named point's own knobs select nothing
    effects = [name for name in compared_knobs(frame) if name in searched_knobs]
    searched = frame[search_runs(frame)] if not frame.empty else frame
    on_front = front_numbers(frame)
    colors = families(frame)  # one colour per family in every figure
    name = study.study_name
    figures = {
        "pareto-figure": pareto_figure(searched, record.FLOPS, f"{what} against forward FLOPs per example", configs),
        "pareto-parameters": pareto_figure(searched, record.PARAMETERS, f"{what} against parameters", configs),
        "pareto-time": pareto_figure(searched, SECONDS_PER_1K, f"{what} against measured training time", configs),
        "knob-effects": knob_effects_figure(frame, effects, _best_baseline_figure(configs, answer)),
        "learning-curves": curves_figure(learning_curves(study, sorted(on_front)), measured.label, colors=colors),
    }
    importance = importances(study)
    if importance:
        figures["importances"] = importance_figure(importance, measured.label, colors)
    divs = dict(zip(figures, _figures_html(list(figures.items()), plotlyjs), strict=True))
    attributes = study.user_attrs
    settings = {
        key: attributes[key]
        for key in (record.COMMAND, record.TASK, record.PRESET, record.BUDGET, record.SEARCH_SPACE, record.OBJECTIVES)
        if key in attributes
    }
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(name)}</title><style>{STYLE}</style></head><body>
<h1>{html.escape(name)}</h1>
<p class="question">{html.escape(str(attributes.get("question", "")))}</p>
<h2>Verdict</h2>
<div class="wide">{table_html(verdict_frame(results), "Nothing compared yet: the sentence below says why.")}</div>
{f"<p><b>{html.escape(note)}</b></p>" if (note := provisional(results.frame)) else ""}
<p class="headline">{html.escape(answer.sentence)}</p>
<p>{html.escape(str(attributes.get(record.RELIABILITY, "How sure: not recorded (a store this product did not write).")))}</p>
<h2>Settings</h2>{_table(settings) if settings else "<p>(not recorded)</p>"}
<h2>Pareto fronts</h2>
<p>The search runs: one colour and one front per family; crosses: the baseline family (dashed front); open
markers: stopped early (a triangle at the bottom edge: far below the contest). Diamonds: each configuration with
fresh seeds, at its headline figure (the fresh seeds' mean on the test split) with its 95% interval, beside the
search run that chose it. Hover a point for every knob and cost.</p>
{divs["pareto-figure"]}{divs["pareto-parameters"]}{divs["pareto-time"]}
<h2>Knob effects</h2>{divs["knob-effects"]}
<h2>Learning curves</h2>{divs["learning-curves"]}
<h2>Knob importance</h2>{divs.get("importances", "<p>Too few complete trials to estimate importances.</p>")}
<h2>Budget by family</h2>{family_budgets(frame).to_html(index=False, escape=True) if not frame.empty else "<p>No trials.</p>"}
<h2>Each family's front</h2>
<p>Headline: the mean over the configuration's fresh seeds (<code>--repeat-seeds</code>) on the held-out test split,
with its 95% t-interval; the search run that selected it was judged on the validation split, shown apart.</p>
<div class="wide">{table_html(fronts_frame(results), "No complete trials yet.")}</div>
<h2>Provenance</h2>{_table(provenance(study, frame, storage_url))}
</body></html>
"""
    return page, figures


def _best_baseline_figure(configs: pd.DataFrame, answer) -> tuple[float, str] | None:
    """The best baseline's headline figure and its label, from the verdict's comparisons (None: none)."""
    for comparison in answer.comparisons:
        if comparison.pairing.at_best_baseline and comparison.baseline["seeds"]:
            row = comparison.baseline
            return float(row["mean"]), f"the best {row[record.FAMILY]}, {headline_figure(row, quality(configs))}"
    return None


def _foreign(study: optuna.Study) -> bool:
    """A study with trials that this product did not create (no settings, no trial of ours)."""
    trials = study.get_trials(deepcopy=False)
    return bool(trials) and record.QUESTION not in study.user_attrs and not any(record.BASELINE in t.user_attrs for t in trials)


def foreign_report_html(
    study: optuna.Study, storage_url: str, *, plotlyjs: PlotlyJs = "inline"
) -> tuple[str, dict[str, go.Figure]]:
    """The page of a study this product did not create: what it has (values, parameters,
    learning curves), and a sentence on what it lacks.

    Args:
        study: Any Optuna study.
        storage_url: Where it was read (shown with any password masked).
        plotlyjs: See ``report_html``.
    """
    trials = study.get_trials(deepcopy=False)
    objectives = study.metric_names or [f"value {i}" for i in range(len(study.directions))]
    rows = [
        {"trial": t.number, "state": t.state.name, **dict(zip(objectives, t.values or [], strict=False)), **t.params}
        for t in trials
    ]
    curves = learning_curves(study, [t.number for t in trials])
    figures = {"learning-curves": curves_figure(curves, "intermediate value", "Learning curves (intermediate values)")}
    (curves_div,) = _figures_html(list(figures.items()), plotlyjs)
    directions = ", ".join(f"{name} ({d.name.lower()})" for name, d in zip(objectives, study.directions, strict=True))
    store = {"study": study.study_name, "store": masked_url(storage_url), "trials": len(trials), "objectives": directions}
    name = html.escape(study.study_name)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{name}</title><style>{STYLE}</style></head><body>
<h1>{name}</h1>
<p class="headline">This study was not created by DAMCHA Studies: it records no attention families, MHA
baselines or costs, so there are no Pareto fronts, knob effects or verdict to show. Its trials' values and parameters
and their learning curves follow.</p>
<h2>Trials</h2>{pd.DataFrame(rows).to_html(index=False, escape=True, na_rep="") if rows else "<p>(no trials)</p>"}
<h2>Learning curves</h2>{curves_div if not curves.empty else "<p>No trial reported intermediate values.</p>"}
<h2>Provenance</h2>{_table(store)}
</body></html>
"""
    return page, figures


def write_report(
    study: optuna.Study,
    path: Path,
    storage_url: str = "",
    *,
    plotlyjs: PlotlyJs = "inline",
    results: StudyResults | None = None,
) -> Path:
    """Write a study's report (from ``results`` when given, else from a fresh read of the study).

    Returns:
        The report's path.
    """
    page, _ = report_html(study, storage_url, plotlyjs=plotlyjs, results=results)
    return write_atomically(path, page)


def compared(studies: list[tuple[optuna.Study, str]]) -> dict[str, StudyResults]:
    """Each study's results, read once, by its label: its name, with its store's URL (masked) when the
    studies come from several stores.

    Args:
        studies: Each study and the URL of the store it was read from.
    """
    several_stores = len({url for _, url in studies}) > 1
    labels = [f"{study.study_name} ({masked_url(url)})" if several_stores else study.study_name for study, url in studies]
    return {label: StudyResults.read(study) for label, (study, _) in zip(labels, studies, strict=True)}


def compare_html(read: dict[str, StudyResults], *, plotlyjs: PlotlyJs = "inline") -> tuple[str, dict[str, go.Figure]]:
    """One page comparing several studies, from one store or several: their fronts on one set of
    axes, then each study's verdict, verdict table and front table.

    Args:
        read: Each study's results by its label (``compared``).
        plotlyjs: See ``report_html``.

    Returns:
        The page, and its figure by id (for static images).
    """
    figures = {"compare-figure": compare_figure({label: results.frame for label, results in read.items()})}
    (div,) = _figures_html(list(figures.items()), plotlyjs)
    sections = "".join(
        f"""<h2>{html.escape(label)}</h2>
<p class="headline">{html.escape(results.verdict.sentence)}</p>
<h3>Verdict</h3>{table_html(verdict_frame(results), "Nothing compared.")}
<h3>Each family's front</h3>{table_html(fronts_frame(results), "No complete trials yet.")}"""
        for label, results in read.items()
    )
    names = ", ".join(html.escape(label) for label in read)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Comparison: {names}</title><style>{STYLE}</style></head><body>
<h1>Comparison</h1><p>{names}</p>{div}{sections}</body></html>
"""
    return page, figures
