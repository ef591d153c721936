"""The agreement–time curve as a figure: how often a replayed study is right (``benchmarks.truth.skill``: it decides
as the cross-fitted truth decides and answers nothing it leaves open wrongly), against the device-hours a study
costs, each search strategy over the budgets it was replayed at, beside a study that searches nothing. It reads
the committed replays (``python -m benchmarks.truth.compare`` writes them) and replays nothing.

    python -m benchmarks.truth.curve                            # docs/truth-curve.png, as docs/truth.md shows it
    python -m benchmarks.truth.curve --output curve.html        # the same figure as a page to hover
    python -m benchmarks.truth.curve --only "cost band"         # those strategies alone

A point is one strategy at one budget (trials, with the preset's repeat seeds): the share of its replays that are
right (with its 95% Wilson interval) at the median device-hours of a study (search, sampler and seed repeats), as
docs/truth.md's tables give them; a strategy replayed at several budgets is a line. A dashed line: the share of
the same study seeds that no search gets right (it costs only its repeats).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from benchmarks.resolution import wilson_interval
from benchmarks.truth.replays_file import read_replays, replays_path, table_version
from benchmarks.truth.skill import NO_SEARCH, REFERENCES
from benchmarks.truth.table import TableError, add_table_arguments, chosen_table
from common.outputs import exit_with

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUTPUT = ROOT / "docs" / "truth-curve.png"
REPLAY_COLUMNS = ("strategy", "trials", "repeat_seeds", "table", "right", "search_hours", "sampler_hours", "repeat_hours")


def curve_info(replays: pd.DataFrame, table: str, repeat_seeds: int, only: list[str] | None = None) -> pd.DataFrame:
    """The figure's points, without plotly (what the tests check).

    Args:
        replays: Rows of the replays file (``benchmarks.truth.compare.run_replays``).
        table: The table's content hash: replays of another state of it are left out.
        repeat_seeds: The fresh seeds a replayed study repeats its compared configurations on.
        only: Strategies whose name contains one of these (None: every one).

    Returns:
        One row per strategy and budget (the reference protocols' aside, ``reference_share``), by strategy then
        trials: ``strategy``, ``trials``, ``replays``, ``right`` (the share right), ``low`` and ``high`` (its 95%
        Wilson interval) and ``hours`` (the median device-hours of a study).
    """
    kept = _current(replays, table, repeat_seeds)
    kept = kept[~kept["strategy"].isin(REFERENCES)]
    if only:
        kept = kept[kept["strategy"].map(lambda name: any(part in name for part in only))]
    rows = []
    for (strategy, trials), group in kept.groupby(["strategy", "trials"], sort=False):
        share = float(group["right"].astype(bool).mean())
        low, high = wilson_interval(share, len(group))
        hours = (group["search_hours"] + group["sampler_hours"] + group["repeat_hours"]).median()
        rows.append(
            {
                "strategy": strategy,
                "trials": int(trials),
                "replays": len(group),
                "right": share,
                "low": low,
                "high": high,
                "hours": float(hours),
            }
        )
    columns = ["strategy", "trials", "replays", "right", "low", "high", "hours"]
    return pd.DataFrame(rows, columns=columns).sort_values(["strategy", "trials"], kind="stable").reset_index(drop=True)


def reference_share(replays: pd.DataFrame, table: str, repeat_seeds: int) -> float:
    """The share of study seeds that no search gets right (``skill.NO_SEARCH``; each seed once: its rows at every
    budget are one study's), NaN where none was replayed."""
    kept = _current(replays, table, repeat_seeds)
    kept = kept[kept["strategy"] == NO_SEARCH].drop_duplicates("seed")
    return float(kept["right"].astype(bool).mean()) if len(kept) else math.nan


def _current(replays: pd.DataFrame, table: str, repeat_seeds: int) -> pd.DataFrame:
    """The replays of ``table`` as it is now, at ``repeat_seeds``."""
    return replays[(replays["table"] == table) & (replays["repeat_seeds"] == repeat_seeds)]


def curve_figure(points: pd.DataFrame, title: str, no_search: float = math.nan):  # noqa: ANN201 (plotly's Figure, imported here: seconds of import)
    """The figure of ``curve_info``'s points: a coloured line for each strategy replayed at several budgets, each point
    labelled with its trials; a grey marker for each strategy replayed at one (its name in the legend and on hover);
    a dashed line at ``no_search`` (``reference_share``), where it is a number."""
    import plotly.express as px
    import plotly.graph_objects as go

    figure = go.Figure()
    budgets = points.groupby("strategy", sort=False)["trials"].transform("nunique")
    curves = points[budgets > 1]
    colours = dict(zip(curves["strategy"].unique(), px.colors.qualitative.D3, strict=False))
    for strategy, rows in points.groupby("strategy", sort=False):
        line = strategy in colours
        colour = colours.get(strategy, "#999999")
        figure.add_trace(
            go.Scatter(
                x=rows["hours"],
                y=100 * rows["right"],
                mode="lines+markers+text" if line else "markers",
                name=strategy if line else f"{strategy} ({int(rows['trials'].iloc[0])} trials)",
                text=[f"{trials}" for trials in rows["trials"]],
                textposition="top left",
                marker={"color": colour, "size": 9 if line else 7, "symbol": "circle" if line else "diamond"},
                line={"color": colour, "width": 2},
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": (100 * (rows["high"] - rows["right"])).tolist(),
                    "arrayminus": (100 * (rows["right"] - rows["low"])).tolist(),
                    "thickness": 1,
                    "color": colour,
                },
                hovertext=[
                    f"{strategy}<br>{r.trials} trials, {r.replays} replays: {r.right:.0%} [{r.low:.0%}, {r.high:.0%}]"
                    f"<br>{r.hours:.2f} device-hours a study (median)"
                    for r in rows.itertuples()
                ],
                hoverinfo="text",
            )
        )
    if not math.isnan(no_search):
        figure.add_hline(
            y=100 * no_search,
            line={"dash": "dash", "color": "#555555"},
            annotation_text=f"no search: a random in-band configuration per family ({no_search:.1%})",
        )
    figure.update_layout(
        title=title,
        xaxis_title="device-hours a study (median: search, sampler and seed repeats); labels: trials a study",
        yaxis_title="studies right against the cross-fitted truth (%, 95% Wilson interval)",
        legend={"font": {"size": 10}, "orientation": "h", "yanchor": "top", "y": -0.12},
        width=1100,
        height=850,
        margin={"l": 80, "r": 30, "t": 60, "b": 40},
        template="plotly_white",
    )
    return figure


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: 0 when the figure was written, 2 on a bad argument or file."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.truth.curve", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_table_arguments(parser)
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help=".png (needs Chrome or Chromium) or .html (default: %(default)s)"
    )
    parser.add_argument("--only", action="append", default=[], help="strategies whose name contains this (repeatable)")
    args = parser.parse_args(argv)
    if args.output.suffix not in (".png", ".html"):
        parser.error(f"--output {args.output} must end in .png or .html")
    try:
        definition, args.table = chosen_table(parser, args)
        repeat_seeds = definition.preset("quick").repeat_seeds
        replays, version = read_replays(replays_path(args.table), REPLAY_COLUMNS), table_version(args.table)
        points = curve_info(replays, version, repeat_seeds, args.only)
    except TableError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the table itself, whose content hash the replays record
        print(f"error: {args.table}: {error.strerror or error}; --table names a truth table", file=sys.stderr)
        return 2
    if points.empty:
        print(f"error: no replays of {args.table.name} as it is now match {args.only or 'any strategy'}", file=sys.stderr)
        return 2
    replayed = int(points["replays"].sum())
    title = f"Right against cost: {replayed} replayed {definition.name} quick studies, {repeat_seeds} repeat seeds each"
    figure = curve_figure(points, title, reference_share(replays, version, repeat_seeds))
    if args.output.suffix == ".png":
        figure.write_image(args.output, scale=1)
    else:
        figure.write_html(args.output, include_plotlyjs=True)
    print(f"wrote {args.output}: {len(points)} points of {points['strategy'].nunique()} strategies")
    return 0


if __name__ == "__main__":
    exit_with(main)
