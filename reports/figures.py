"""Thin plotly builders over the report's frames (``studies.results.frame``, ``studies.results.verdict``)."""

from __future__ import annotations

import html
import itertools

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from storage import record
from studies.results.configurations import headline_figure
from studies.results.frame import knob_columns, search_runs
from studies.results.fronts import family_order, pareto_mask
from studies.results.names import FAMILIES_ATTRIBUTE
from studies.results.quality import Quality, quality

SECONDS_PER_1K = "seconds_per_1k_examples"
AXES = {
    record.FLOPS: "forward FLOPs per example (log scale)",
    record.PARAMETERS: "parameters (log scale)",
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
    frame[SECONDS_PER_1K] = 1000 / pd.to_numeric(frame[record.EXAMPLES_PER_S], errors="coerce")
    return frame


_COSTS_SHOWN = (  # a trial's costs in a hover text: the column, and how its value reads
    (record.FLOPS, lambda value: f"{value:.3g} FLOPs per example"),
    (record.PARAMETERS, lambda value: f"{value:,.0f} parameters"),
    (record.EXAMPLES_PER_S, lambda value: f"{value:,.0f} examples/s"),
    (record.PEAK_MEMORY_BYTES, lambda value: f"{value / 2**20:.1f} MiB peak memory"),
    (record.WALL_SECONDS, lambda value: f"{value:.0f} s wall time"),
)


def hover_text(row: pd.Series, knobs: list[str], measured: Quality) -> str:
    """A trial in words, HTML-escaped, one per line: its family and state (a seed repeat says whose; a stopped
    trial where it stopped), every knob (``knobs``), the study's first objective as
    it is shown (``measured``: %, bits per byte) and its costs in units."""
    point = f", {row[record.POINT]}" if isinstance(row.get(record.POINT), str) else ""
    state = str(row["state"]).lower()
    if state == "pruned" and pd.notna(row.get(record.REACHED_STEP)):
        state = f"stopped early at step {int(row[record.REACHED_STEP])}"
    if pd.notna(row.get(record.REPEAT_OF)):  # numbered in the study of repeats: named by the search trial it repeats
        index = f" {int(row[record.REPEAT_INDEX])}" if pd.notna(row.get(record.REPEAT_INDEX)) else ""
        trial = f"seed repeat{index} of trial {int(row[record.REPEAT_OF])}"
    else:
        trial = f"trial {row['number']}"
    lines = [f"{trial}: {row[record.FAMILY]}{point} ({state})"]
    lines += [f"{name} = {row[name]}" for name in knobs if name in row and row[name] is not None]
    lines.append(f"{measured.label}: {measured.shown(row[measured.column])}")
    lines += [show(float(row[name])) for name, show in _COSTS_SHOWN if pd.notna(row.get(name))]
    return "<br>".join(plain(line) for line in lines)


def families(frame: pd.DataFrame) -> dict[str, str]:
    """The frame's families, the baseline first, each with its colour: fixed by the study's family order
    (the frame's ``FAMILIES_ATTRIBUTE``), the baseline's red, so that a family has one colour in every
    figure and page, whichever of its trials a figure shows."""
    present = family_order(frame)
    order = list(frame.attrs.get(FAMILIES_ATTRIBUTE) or present)
    order += [family for family in present if family not in order]
    baselines = set(frame.loc[frame[record.BASELINE], record.FAMILY]) if record.BASELINE in frame else set()
    if not baselines and order and FAMILIES_ATTRIBUTE in frame.attrs:
        baselines = {order[0]}  # the study's families list the baseline's first
    palette = itertools.cycle(FAMILY_PALETTE)
    colors = {family: COLORS["mha"] if family in baselines else next(palette) for family in order}
    return {family: colors[family] for family in present}


def _splits_axis(measured: Quality, configs: pd.DataFrame | None) -> str:
    """The Pareto figures' value axis, naming each split it shows: the search runs' validation values and, where
    fresh seeds were trained, their test values (the diamonds)."""
    if configs is None or configs.empty or not (configs["seeds"] > 0).any():
        return measured.label
    judged = configs.loc[configs["seeds"] > 0, "judged_on"]
    if (judged != "test").all():
        return f"{measured.label} (search runs; diamonds: fresh seeds)"
    return f"{measured.label} (search runs) · {measured.test_label} (diamonds: fresh seeds)"


def pareto_figure(frame: pd.DataFrame, x: str, title: str, configs: pd.DataFrame | None = None) -> go.Figure:
    """The study's first objective against one cost: each family's search runs and its front (the baseline's dashed,
    crosses), and each configuration with fresh seeds (``configs``: ``configurations``) as one diamond at its
    headline figure with its 95% interval as an error bar, beside the search run that chose it."""
    figure = go.Figure()
    knobs, measured = knob_columns(frame), quality(frame)
    shown = frame[frame["state"].isin(["COMPLETE", "PRUNED"]) & frame[measured.column].notna()].copy()
    right_edge = pd.to_numeric(shown[x], errors="coerce").max()
    low, high = contested_range(shown, measured.column)
    if configs is not None and not configs.empty and pd.notna(low):  # the diamonds and their error bars are in it too
        judged = configs.loc[configs["seeds"] > 0, ["mean", "ci_low", "ci_high"]]
        low, high = min([low, *judged.min().dropna()]), max([high, *judged.max().dropna()])
    outside = (shown[measured.column] < low) | (shown[measured.column] > high)  # stopped outliers: drawn at the edge
    shown["drawn"] = shown[measured.column].clip(low, high)
    for family, color in families(shown).items():
        rows = shown[shown[record.FAMILY] == family]
        baseline = bool(rows[record.BASELINE].iloc[0])
        symbol, size = ("x", 11) if baseline else ("circle", 9)
        complete, stopped = rows[rows["state"] == "COMPLETE"], rows[rows["state"] == "PRUNED"]
        clipped = stopped[outside.reindex(stopped.index, fill_value=False)]
        for name, subset, marker in (
            (family, complete, {"symbol": symbol, "color": color, "size": size}),
            (f"{family}, stopped early", stopped.drop(clipped.index), {"symbol": f"{symbol}-open", "color": color, "size": 8}),
            (f"{family}, stopped early, off the scale", clipped, {"symbol": "triangle-down-open", "color": color, "size": 9}),
        ):
            if subset.empty and name != family:
                continue
            figure.add_trace(
                go.Scatter(
                    x=subset[x],
                    y=subset["drawn"],
                    mode="markers",
                    name=plain(name),
                    legendgroup=plain(family),
                    marker=marker,
                    hovertext=[hover_text(row, knobs, measured) for _, row in subset.iterrows()],
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
        if configs is not None and not configs.empty:
            repeated = configs[(configs[record.FAMILY] == family) & (configs["seeds"] > 0)]
            if x == SECONDS_PER_1K and not repeated.empty:
                repeated = with_time_column(repeated)
            if not repeated.empty:
                figure.add_trace(
                    go.Scatter(
                        x=repeated[x],
                        y=repeated["mean"],
                        mode="markers",
                        name=plain(f"{family}, fresh seeds ({measured.test_label}, 95% CI)"),
                        legendgroup=plain(family),
                        marker={"symbol": "diamond", "color": color, "size": 10, "line": {"color": "#222", "width": 1}},
                        error_y={
                            "type": "data",
                            "symmetric": False,
                            "array": (repeated["ci_high"] - repeated["mean"]).fillna(0).tolist(),
                            "arrayminus": (repeated["mean"] - repeated["ci_low"]).fillna(0).tolist(),
                            "color": color,
                        },
                        hovertext=[
                            plain(f"{family}: search run {row['number']}, {headline_figure(row, measured)}")
                            for _, row in repeated.iterrows()
                        ],
                        hoverinfo="text",
                    )
                )
    figure.update_layout(
        title=plain(title), xaxis_title=AXES[x], yaxis_title=plain(_splits_axis(measured, configs)), xaxis_type="log", **LAYOUT
    )
    if pd.notna(low):
        figure.update_yaxes(range=[low, high])
    return figure


def contested_range(frame: pd.DataFrame, column: str) -> tuple[float, float]:
    """The values the contest spans: the complete trials' (the stopped ones' too when none completed), padded by
    a tenth; a trial stopped far outside it is drawn at its edge rather than stretching the axis."""
    complete = frame.loc[frame["state"] == "COMPLETE", column].dropna()
    values = complete if not complete.empty else frame[column].dropna()
    if values.empty:
        return float("nan"), float("nan")
    low, high = float(values.min()), float(values.max())
    pad = (high - low) / 10 or abs(high) / 100 or 0.01
    return low - pad, high + pad


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
    hover_knobs = knob_columns(frame)
    # One point per configuration: one the search ran twice is one configuration (the mean of its runs).
    same = [record.FAMILY, *[k for k in hover_knobs if k in complete.columns]]
    complete = complete.assign(
        **{measured.column: complete.groupby(same, dropna=False, sort=False)[measured.column].transform("mean")}
    ).drop_duplicates(subset=same)
    compared = complete[~complete[record.BASELINE]]
    knobs = [k for k in knobs if k in compared.columns and compared[k].notna().any()]
    if not knobs:
        figure = go.Figure()
        figure.add_annotation(text="no complete trials to compare yet", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        figure.update_layout(title="Knob effects", **LAYOUT)
        return figure
    titles = [plain(knob) for knob in knobs]
    figure = make_subplots(rows=1, cols=len(knobs), shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.04)
    colors = {family: color for family, color in families(complete).items() if family in set(compared[record.FAMILY])}
    for column, knob in enumerate(knobs, start=1):
        for family, color in colors.items():
            rows = compared[(compared[record.FAMILY] == family) & compared[knob].notna()]
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
                    hovertext=[hover_text(row, hover_knobs, measured) for _, row in rows.iterrows()],
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
    dashed = f"<br>dashed: {plain(reference[1])}" if reference is not None else ""  # a second line: it fits the page
    figure.update_layout(
        title=f"Knob effects by family: one point per configuration searched, {plain(measured.label)}{dashed}",
        boxmode="group",
        **(LAYOUT | {"margin": LAYOUT["margin"] | {"t": 100}}),  # the title's two lines above the knobs' titles
    )
    return figure


def curves_figure(
    curves: pd.DataFrame,
    y_title: str,
    title: str = "Learning curves of the search runs on each family's front",
    colors: dict[str, str] | None = None,
) -> go.Figure:
    """Intermediate values (``studies.results.details.learning_curves``) by step, coloured by family (``colors``:
    the study's, ``families``; else the curves' own); pruned trials dotted."""
    figure = go.Figure()
    colors = colors or (families(curves.drop_duplicates("number")) if not curves.empty else {})
    for number, curve in curves.groupby("number", sort=True):
        family, state = curve[record.FAMILY].iloc[0], curve["state"].iloc[0]
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


def importance_figure(importances: dict[str, dict[str, float]], target: str, colors: dict[str, str]) -> go.Figure:
    """Each family's knob importances for ``target`` (the study's first objective), as grouped horizontal bars."""
    names = list(dict.fromkeys(name for values in importances.values() for name in values))[::-1]
    figure = go.Figure()
    for family, values in importances.items():
        figure.add_trace(
            go.Bar(
                x=[values.get(name, 0.0) for name in names],
                y=[plain(name) for name in names],
                orientation="h",
                name=plain(family),
                marker={"color": colors.get(family, COLORS["pruned"])},
            )
        )
    figure.update_layout(
        title=f"Knob importance for {plain(target)} within each family (Optuna PED-ANOVA, complete search runs)",
        xaxis_title="importance (share of the family's total)",
        barmode="group",
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
            rows = complete[complete[record.FAMILY] == family]
            front = rows[pareto_mask(rows)].sort_values(record.FLOPS)
            figure.add_trace(
                go.Scatter(
                    x=front[record.FLOPS],
                    y=front[measured.column],
                    mode="lines+markers",
                    name=plain(f"{study_name}: {family} front"),
                    line={"dash": "dash" if rows[record.BASELINE].iloc[0] else "solid", "shape": "hv"},
                    hovertext=[hover_text(row, knobs, measured) for _, row in front.iterrows()],
                    hoverinfo="text",
                )
            )
    figure.update_layout(
        title="Pareto fronts of several studies",
        xaxis_title=AXES[record.FLOPS],
        yaxis_title=" / ".join(dict.fromkeys(plain(quality(frame).label) for frame in frames.values())),
        xaxis_type="log",
        **LAYOUT,
    )
    return figure
