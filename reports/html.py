"""A self-contained HTML report of a study: the accuracy/FLOPs Pareto front against MHA, and every trial."""

from __future__ import annotations

import html
import os
from pathlib import Path

import optuna
import pandas as pd
import plotly.graph_objects as go

from reports.data import ACCURACY, FLOPS, pareto_mask, trials_frame

TABLE_COLUMNS = ("number", "state", "baseline", "attention", "d_model", "num_heads", "sharing", "metric_rank",
                 "generator_depth", ACCURACY, FLOPS, "parameters", "examples_per_s", "wall_seconds", "reached_step")  # fmt: skip


def pareto_figure(frame: pd.DataFrame, title: str) -> go.Figure:
    """Accuracy against forward FLOPs: DAMCHA trials, MHA baselines (marked), and the Pareto front."""
    figure = go.Figure()
    finished = frame[frame["state"].isin(["COMPLETE", "PRUNED"])] if not frame.empty else frame
    for label, rows, symbol in (
        ("DAMCHA", finished[~finished["baseline"] & (finished["state"] == "COMPLETE")], "circle"),
        ("DAMCHA (stopped early)", finished[~finished["baseline"] & (finished["state"] == "PRUNED")], "circle-open"),
        ("MHA baseline", finished[finished["baseline"]], "x"),
    ):
        figure.add_trace(go.Scatter(
            x=rows[FLOPS], y=rows[ACCURACY], mode="markers", name=label, marker={"symbol": symbol, "size": 10},
            text=[f"trial {n}" for n in rows["number"]],
        ))  # fmt: skip
    front = frame[pareto_mask(frame)].sort_values(FLOPS) if not frame.empty else frame
    figure.add_trace(go.Scatter(x=front[FLOPS], y=front[ACCURACY], mode="lines", name="Pareto front", line={"shape": "hv"}))
    figure.update_layout(title=title, xaxis_title="forward FLOPs per example", yaxis_title="validation accuracy", xaxis_type="log")
    return figure


def write_report(study: optuna.Study, path: Path) -> Path:
    """Write the report; the file works offline (plotly.js is embedded).

    The file is written next to its final name and renamed, so a reader never sees half of it.

    Returns:
        The report's path.
    """
    frame = trials_frame(study)
    figure = pareto_figure(frame, f"{study.study_name}: accuracy against compute")
    table = frame[[c for c in TABLE_COLUMNS if c in frame.columns]].to_html(index=False, na_rep="", float_format="{:.4g}".format)
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(study.study_name)}</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}} td,th{{padding:2px 8px;border-bottom:1px solid #ddd}}</style>
</head><body>
<h1>{html.escape(study.study_name)}</h1>
<div id="pareto">{figure.to_html(include_plotlyjs=True, full_html=False, div_id="pareto-figure")}</div>
<h2>Trials</h2>
{table}
</body></html>
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(page, encoding="utf-8")
    os.replace(partial, path)
    return path
