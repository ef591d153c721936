"""Thin plotly builders over the report's frames (``storage.trials``, ``reports.analysis``)."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from storage.trials import ACCURACY, FLOPS, knob_columns, pareto_mask

SECONDS_PER_1K = "seconds_per_1k_examples"
AXES = {
    FLOPS: "forward FLOPs per example (log scale)",
    "parameters": "parameters (log scale)",
    SECONDS_PER_1K: "measured training time per 1,000 examples, s (log scale)",
}
COLORS = {"damcha": "#1f77b4", "mha": "#d62728", "pruned": "#9e9e9e"}
LAYOUT = {
    "template": "plotly_white",
    "height": 460,
    "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
    "hoverlabel": {"align": "left"},
}


def with_time_column(frame: pd.DataFrame) -> pd.DataFrame:
    """Adds measured seconds per 1,000 training examples (from ``examples_per_s``)."""
    frame = frame.copy()
    frame[SECONDS_PER_1K] = 1000 / pd.to_numeric(frame["examples_per_s"], errors="coerce")
    return frame


def hover_text(row: pd.Series, knobs: list[str]) -> str:
    """Every knob (``knobs``: the frame's knob columns) and cost of a trial, HTML-escaped, one per line."""
    lines = [f"trial {row['number']} ({row['state'].lower()}{', MHA baseline' if row['baseline'] else ''})"]
    lines += [f"{name} = {row[name]}" for name in knobs if name in row and row[name] is not None]
    lines.append(f"val accuracy = {row[ACCURACY]:.4f}")
    for name, unit in (
        (FLOPS, "FLOPs/example"),
        ("parameters", "parameters"),
        ("examples_per_s", "examples/s"),
        ("peak_memory_bytes", "bytes peak"),
        ("wall_seconds", "s wall"),
    ):
        if pd.notna(row.get(name)):
            lines.append(f"{unit}: {float(row[name]):.4g}")
    return "<br>".join(html.escape(line) for line in lines)


def pareto_figure(frame: pd.DataFrame, x: str, title: str) -> go.Figure:
    """Accuracy against one cost: DAMCHA trials and their front, MHA baselines and their front."""
    figure = go.Figure()
    knobs = knob_columns(frame)
    shown = frame[frame["state"].isin(["COMPLETE", "PRUNED"]) & frame[ACCURACY].notna()]
    damcha, mha = shown[~shown["baseline"]], shown[shown["baseline"]]
    for name, rows, marker in (
        ("DAMCHA", damcha[damcha["state"] == "COMPLETE"], {"symbol": "circle", "color": COLORS["damcha"], "size": 9}),
        (
            "DAMCHA, stopped early",
            damcha[damcha["state"] == "PRUNED"],
            {"symbol": "circle-open", "color": COLORS["pruned"], "size": 8},
        ),
        ("MHA baseline", mha[mha["state"] == "COMPLETE"], {"symbol": "x", "color": COLORS["mha"], "size": 11}),
        ("MHA baseline, stopped early", mha[mha["state"] == "PRUNED"], {"symbol": "x-open", "color": COLORS["mha"], "size": 9}),
    ):
        figure.add_trace(
            go.Scatter(
                x=rows[x],
                y=rows[ACCURACY],
                mode="markers",
                name=name,
                marker=marker,
                hovertext=[hover_text(row, knobs) for _, row in rows.iterrows()],
                hoverinfo="text",
            )
        )
    right_edge = pd.to_numeric(shown[x], errors="coerce").max()
    for name, rows, line in (
        ("DAMCHA front", damcha, {"color": COLORS["damcha"], "width": 3, "shape": "hv"}),
        ("MHA front (reference)", mha, {"color": COLORS["mha"], "width": 2, "dash": "dash", "shape": "hv"}),
    ):
        front = rows[pareto_mask(rows, x=x)].sort_values(x) if not rows.empty else rows
        xs, ys = front[x].tolist(), front[ACCURACY].tolist()
        if ys and pd.notna(right_edge) and right_edge > xs[-1]:
            xs, ys = [*xs, right_edge], [*ys, ys[-1]]  # a front holds to the right: more cost buys at least as much
        figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, line=line, hoverinfo="skip"))
    figure.update_layout(title=title, xaxis_title=AXES[x], yaxis_title="validation accuracy", xaxis_type="log", **LAYOUT)
    return figure


def knob_effects_figure(frame: pd.DataFrame, knobs: list[str]) -> go.Figure:
    """Accuracy of complete DAMCHA trials by each knob's value; the best MHA baseline as a line."""
    complete = frame[(frame["state"] == "COMPLETE") & frame[ACCURACY].notna()]
    damcha = complete[~complete["baseline"]]
    hover_knobs = knob_columns(frame)
    knobs = [k for k in knobs if k in damcha.columns and damcha[k].notna().any()]
    if not knobs:
        figure = go.Figure()
        figure.add_annotation(text="no complete DAMCHA trials yet", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        figure.update_layout(title="Knob effects", **LAYOUT)
        return figure
    figure = make_subplots(rows=1, cols=len(knobs), shared_yaxes=True, subplot_titles=knobs, horizontal_spacing=0.04)
    best_mha = complete.loc[complete["baseline"], ACCURACY].max()
    for column, knob in enumerate(knobs, start=1):
        values = damcha[knob].astype(str)
        figure.add_trace(
            go.Box(
                x=values,
                y=damcha[ACCURACY],
                boxpoints="all",
                jitter=0.3,
                pointpos=0,
                name=knob,
                showlegend=False,
                marker={"color": COLORS["damcha"]},
                hovertext=[hover_text(row, hover_knobs) for _, row in damcha.iterrows()],
                hoverinfo="text",
            ),
            row=1,
            col=column,
        )
        if pd.notna(best_mha):
            figure.add_hline(y=best_mha, line={"color": COLORS["mha"], "dash": "dash"}, row=1, col=column)
        order = sorted(
            damcha[knob].dropna().unique(), key=lambda v: (isinstance(v, str), v if not isinstance(v, str) else 0, str(v))
        )
        figure.update_xaxes(
            type="category", categoryorder="array", categoryarray=[str(v) for v in order], title_text=knob, row=1, col=column
        )
    figure.update_yaxes(title_text="validation accuracy", row=1, col=1)
    figure.update_layout(title="Knob effects: complete DAMCHA trials (dashed: best MHA baseline)", **LAYOUT)
    return figure


def curves_figure(
    curves: pd.DataFrame,
    title: str = "Learning curves: the DAMCHA front and the MHA baselines",
    y_title: str = "validation accuracy",
) -> go.Figure:
    """Intermediate values (validation accuracy) against step; baselines red, pruned trials grey and dotted."""
    figure = go.Figure()
    for number, curve in curves.groupby("number", sort=True):
        baseline, state = bool(curve["baseline"].iloc[0]), curve["state"].iloc[0]
        color = COLORS["mha"] if baseline else COLORS["pruned"] if state == "PRUNED" else COLORS["damcha"]
        dash = "dot" if state == "PRUNED" else "solid"
        label = f"trial {number}" + (" (MHA)" if baseline else "") + (" (stopped early)" if state == "PRUNED" else "")
        figure.add_trace(
            go.Scatter(
                x=curve["step"],
                y=curve[ACCURACY],
                mode="lines+markers",
                name=label,
                line={"color": color, "dash": dash},
                marker={"size": 5},
            )
        )
    figure.update_layout(title=title, xaxis_title="training step", yaxis_title=y_title, **LAYOUT)
    return figure


def importance_figure(importances: dict[str, float]) -> go.Figure:
    """Horizontal bars of knob importances for validation accuracy."""
    names = list(importances)[::-1]
    figure = go.Figure(go.Bar(x=[importances[n] for n in names], y=names, orientation="h", marker={"color": COLORS["damcha"]}))
    figure.update_layout(
        title="Knob importance for validation accuracy (Optuna PED-ANOVA)",
        xaxis_title="importance (share of the total)",
        **LAYOUT,
    )
    return figure


def compare_figure(frames: dict[str, pd.DataFrame]) -> go.Figure:
    """Several studies' DAMCHA fronts and MHA fronts on one set of axes (accuracy against FLOPs)."""
    figure = go.Figure()
    for study_name, frame in frames.items():
        knobs = knob_columns(frame)
        complete = frame[(frame["state"] == "COMPLETE") & frame[ACCURACY].notna()]
        for label, rows, dash in (
            ("DAMCHA", complete[~complete["baseline"]], "solid"),
            ("MHA", complete[complete["baseline"]], "dash"),
        ):
            front = rows[pareto_mask(rows)].sort_values(FLOPS) if not rows.empty else rows
            figure.add_trace(
                go.Scatter(
                    x=front[FLOPS],
                    y=front[ACCURACY],
                    mode="lines+markers",
                    name=html.escape(f"{study_name}: {label} front"),
                    line={"dash": dash, "shape": "hv"},
                    hovertext=[hover_text(row, knobs) for _, row in front.iterrows()],
                    hoverinfo="text",
                )
            )
    figure.update_layout(
        title="Pareto fronts of several studies",
        xaxis_title=AXES[FLOPS],
        yaxis_title="validation accuracy",
        xaxis_type="log",
        **LAYOUT,
    )
    return figure
