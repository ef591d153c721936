"""Thin plotly builders over the report's frames (``reports.results.frame``, ``reports.results.verdict``)."""

from __future__ import annotations

import html
import itertools

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reports.results.frame import knob_columns, search_runs
from reports.results.fronts import family_order, pareto_mask
from reports.results.names import FLOPS
from reports.results.quality import quality

SECONDS_PER_1K = "seconds_per_1k_examples"
AXES = {
    FLOPS: "forward FLOPs per example (log scale)",
    "parameters": "parameters (log scale)",
    SECONDS_PER_1K: "measured training time per 1,000 examples, s (log scale)",
}
COLORS = {"damcha": "#1f77b4", "mha": "#d62728", "pruned": "#9e9e9e"}
FAMILY_PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
LAYOUT = {
    "template": "plotly_white",
    "height": 460,
    "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
    "hoverlabel": {"align": "left"},
}


def plain(text: object) -> str:
    """A string from a store as plotly must show it: as text. Plotly reads a subset of HTML in titles,
    tick labels, legend names and hover texts (links, bold, styles); escaped, the tags show as written."""
    return html.escape(str(text), quote=False)


def with_time_column(frame: pd.DataFrame) -> pd.DataFrame:
    """Adds measured seconds per 1,000 training examples (from ``examples_per_s``)."""
    frame = frame.copy()
    frame[SECONDS_PER_1K] = 1000 / pd.to_numeric(frame["examples_per_s"], errors="coerce")
    return frame


def hover_text(row: pd.Series, knobs: list[str], column: str) -> str:
    """Every knob (``knobs``: the frame's knob columns), the value of ``column`` (the study's
    first objective) and the costs of a trial, HTML-escaped, one per line."""
    point = f", {row['point']}" if isinstance(row.get("point"), str) else ""
    lines = [f"trial {row['number']}: {row['family']}{point} ({row['state'].lower()})"]
    lines += [f"{name} = {row[name]}" for name in knobs if name in row and row[name] is not None]
    lines.append(f"{column} = {row[column]:.4f}")
    for name, unit in (
        (FLOPS, "FLOPs/example"),
        ("parameters", "parameters"),
        ("examples_per_s", "examples/s"),
        ("peak_memory_bytes", "bytes peak"),
        ("wall_seconds", "s wall"),
    ):
        if pd.notna(row.get(name)):
            lines.append(f"{unit}: {float(row[name]):.4g}")
    return "<br>".join(plain(line) for line in lines)


def families(frame: pd.DataFrame) -> dict[str, str]:
    """The frame's families, the baseline first, each with its colour (the baseline's red)."""
    baselines = set(frame.loc[frame["baseline"], "family"])
    palette = itertools.cycle(FAMILY_PALETTE)
    return {family: COLORS["mha"] if family in baselines else next(palette) for family in family_order(frame)}


def pareto_figure(frame: pd.DataFrame, x: str, title: str) -> go.Figure:
    """The study's first objective against one cost: each family's trials and its front (the baseline's dashed, crosses)."""
    figure = go.Figure()
    knobs, measured = knob_columns(frame), quality(frame)
    shown = frame[frame["state"].isin(["COMPLETE", "PRUNED"]) & frame[measured.column].notna()]
    right_edge = pd.to_numeric(shown[x], errors="coerce").max()
    for family, color in families(shown).items():
        rows = shown[shown["family"] == family]
        baseline = bool(rows["baseline"].iloc[0])
        symbol, size = ("x", 11) if baseline else ("circle", 9)
        complete, stopped = rows[rows["state"] == "COMPLETE"], rows[rows["state"] == "PRUNED"]
        for name, subset, marker in (
            (family, complete, {"symbol": symbol, "color": color, "size": size}),
            (f"{family}, stopped early", stopped, {"symbol": f"{symbol}-open", "color": color, "size": 8}),
        ):
            figure.add_trace(
                go.Scatter(
                    x=subset[x],
                    y=subset[measured.column],
                    mode="markers",
                    name=plain(name),
                    legendgroup=plain(family),
                    marker=marker,
                    hovertext=[hover_text(row, knobs, measured.column) for _, row in subset.iterrows()],
                    hoverinfo="text",
                )
            )
        front = rows[pareto_mask(rows, x=x)].sort_values(x)
        xs, ys = front[x].tolist(), front[measured.column].tolist()
        if ys and pd.notna(right_edge) and right_edge > xs[-1]:
            xs, ys = [*xs, right_edge], [*ys, ys[-1]]  # a front holds to the right: more cost buys at least as much
        line = {"color": color, "width": 2 if baseline else 3, "shape": "hv"} | ({"dash": "dash"} if baseline else {})
        name = plain(f"{family} front" + (" (reference)" if baseline else ""))
        figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, legendgroup=plain(family), line=line, hoverinfo="skip"))
    figure.update_layout(title=plain(title), xaxis_title=AXES[x], yaxis_title=plain(measured.label), xaxis_type="log", **LAYOUT)
    return figure


def knob_effects_figure(frame: pd.DataFrame, knobs: list[str], reference: tuple[float, str] | None = None) -> go.Figure:
    """The first objective of each non-baseline family's complete search runs by each knob's value (seed
    repeats are no new configurations), and ``reference``, the best baseline's headline figure, as a line.

    Args:
        frame: ``trials_frame``.
        knobs: The knobs to draw, one panel each.
        reference: The best baseline's headline figure and its label (None: no line).
    """
    measured = quality(frame)
    complete = frame[(frame["state"] == "COMPLETE") & frame[measured.column].notna() & search_runs(frame)]
    compared = complete[~complete["baseline"]]
    hover_knobs = knob_columns(frame)
    knobs = [k for k in knobs if k in compared.columns and compared[k].notna().any()]
    if not knobs:
        figure = go.Figure()
        figure.add_annotation(text="no complete trials to compare yet", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        figure.update_layout(title="Knob effects", **LAYOUT)
        return figure
    titles = [plain(knob) for knob in knobs]
    figure = make_subplots(rows=1, cols=len(knobs), shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.04)
    colors = {family: color for family, color in families(complete).items() if family in set(compared["family"])}
    for column, knob in enumerate(knobs, start=1):
        for family, color in colors.items():
            rows = compared[(compared["family"] == family) & compared[knob].notna()]
            figure.add_trace(
                go.Box(
                    x=rows[knob].map(plain),
                    y=rows[measured.column],
                    boxpoints="all",
                    jitter=0.3,
                    pointpos=0,
                    name=plain(family),
                    legendgroup=plain(family),
                    offsetgroup=plain(family),
                    showlegend=column == 1,
                    marker={"color": color},
                    hovertext=[hover_text(row, hover_knobs, measured.column) for _, row in rows.iterrows()],
                    hoverinfo="text",
                ),
                row=1,
                col=column,
            )
        if reference is not None and pd.notna(reference[0]):
            figure.add_hline(y=reference[0], line={"color": COLORS["mha"], "dash": "dash"}, row=1, col=column)
        order = sorted(
            compared[knob].dropna().unique(), key=lambda v: (isinstance(v, str), v if not isinstance(v, str) else 0, str(v))
        )
        figure.update_xaxes(
            type="category",
            categoryorder="array",
            categoryarray=[plain(v) for v in order],
            title_text=plain(knob),
            row=1,
            col=column,
        )
    figure.update_yaxes(title_text=plain(measured.label), row=1, col=1)
    dashed = f" (dashed: {plain(reference[1])})" if reference is not None else ""
    figure.update_layout(
        title=f"Knob effects by family: complete search runs, {plain(measured.label)}{dashed}", boxmode="group", **LAYOUT
    )
    return figure


def curves_figure(
    curves: pd.DataFrame, y_title: str, title: str = "Learning curves of the search runs on each family's front"
) -> go.Figure:
    """Intermediate values (``reports.results.details.learning_curves``) by step, coloured by family; pruned trials dotted."""
    figure = go.Figure()
    colors = families(curves.drop_duplicates("number")) if not curves.empty else {}
    for number, curve in curves.groupby("number", sort=True):
        family, state = curve["family"].iloc[0], curve["state"].iloc[0]
        label = f"trial {number} ({family})" + (" (stopped early)" if state == "PRUNED" else "")
        figure.add_trace(
            go.Scatter(
                x=curve["step"],
                y=curve["value"],
                mode="lines+markers",
                name=plain(label),
                line={"color": colors.get(family, COLORS["pruned"]), "dash": "dot" if state == "PRUNED" else "solid"},
                marker={"size": 5},
            )
        )
    figure.update_layout(title=plain(title), xaxis_title="training step", yaxis_title=plain(y_title), **LAYOUT)
    return figure


def importance_figure(importances: dict[str, float], target: str) -> go.Figure:
    """Horizontal bars of knob importances for ``target`` (the study's first objective)."""
    names = list(importances)[::-1]
    bars = go.Bar(
        x=[importances[n] for n in names], y=[plain(n) for n in names], orientation="h", marker={"color": COLORS["damcha"]}
    )
    figure = go.Figure(bars)
    figure.update_layout(
        title=f"Knob importance for {plain(target)} (Optuna PED-ANOVA)",
        xaxis_title="importance (share of the total)",
        **LAYOUT,
    )
    return figure


def compare_figure(frames: dict[str, pd.DataFrame]) -> go.Figure:
    """Several studies' family fronts on one set of axes (first objective against FLOPs; baselines dashed).

    Studies whose first objectives differ share the axes only in name: the y axis names each one.
    """
    figure = go.Figure()
    for study_name, frame in frames.items():
        knobs, measured = knob_columns(frame), quality(frame)
        complete = frame[(frame["state"] == "COMPLETE") & frame[measured.column].notna()]
        for family in families(complete):
            rows = complete[complete["family"] == family]
            front = rows[pareto_mask(rows)].sort_values(FLOPS)
            figure.add_trace(
                go.Scatter(
                    x=front[FLOPS],
                    y=front[measured.column],
                    mode="lines+markers",
                    name=plain(f"{study_name}: {family} front"),
                    line={"dash": "dash" if rows["baseline"].iloc[0] else "solid", "shape": "hv"},
                    hovertext=[hover_text(row, knobs, measured.column) for _, row in front.iterrows()],
                    hoverinfo="text",
                )
            )
    figure.update_layout(
        title="Pareto fronts of several studies",
        xaxis_title=AXES[FLOPS],
        yaxis_title=" / ".join(dict.fromkeys(plain(quality(frame).label) for frame in frames.values())),
        xaxis_type="log",
        **LAYOUT,
    )
    return figure
