"""Print what a truth table says: each family's true front, the true matched-cost verdict and each
knob's true effect per family.

    python -m benchmarks.truth                                # lra_sharing's committed table
    python -m benchmarks.truth --study cross_head             # another study's
    python -m benchmarks.truth --table path/to/table.csv      # a table file (its .json beside it)
    python -m benchmarks.truth --resamples 0                  # without the truth's stability (a minute or more)
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from benchmarks.truth.crossfit import cross_fitted_verdict, in_sample, out_of_sample, seed_sets
from benchmarks.truth.stability import stability
from benchmarks.truth.table import Table, TableError, add_table_arguments, chosen_table, load
from benchmarks.truth.truth import configurations, knob_effects, significant, true_fronts, true_verdict
from common.outputs import exit_with
from storage import record
from studies.results.configurations import knob_text


def _knobs_text(row: pd.Series, knobs: list[str]) -> str:
    shown = [f"{name}={knob_text(row[name])}" for name in knobs if name != "attention" and knob_text(row[name])]
    return (f"[{row[record.POINT]}] " if isinstance(row[record.POINT], str) else "") + " ".join(shown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.truth", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_table_arguments(parser)
    parser.add_argument(
        "--resamples",
        type=int,
        default=100,
        help="bootstrap resamples of the seeds for the truth's stability (default: 100, about a second each; 0: none)",
    )
    args = parser.parse_args(argv)
    if args.resamples < 0:
        parser.error(f"--resamples must be 0 or more, got {args.resamples}")
    try:
        _, args.table = chosen_table(parser, args)
        table = load(args.table)
    except TableError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    configs = configurations(table)
    seeds = configs["seeds"].value_counts().sort_index()
    expected = (table.provenance.get(record.BUDGET) or {}).get("trials")
    print(f"{args.table.name}: {len(table.rows)} of {expected} trials, {len(configs)} configurations", end="")
    print(" (" + ", ".join(f"{count} with {n} seeds" for n, count in seeds.items()) + ")")
    if expected and len(table.rows) < expected:
        print("  partial: the figures below are over the seeds trained so far (python -m benchmarks.truth.build resumes it)")

    print("\nTrue fronts (test accuracy, mean over seeds [95% CI], against forward FLOPs per example):")
    for family, front in true_fronts(configs).groupby(record.FAMILY, sort=False):
        print(f"  {family}:")
        for _, row in front.iterrows():
            interval = "" if pd.isna(row["test_low"]) else f" [{100 * row['test_low']:.1f}, {100 * row['test_high']:.1f}]"
            print(
                f"    {row[record.FLOPS]:.3g} FLOPs  {100 * row[record.TEST_ACCURACY]:.1f}%{interval} test, "
                f"{100 * row[record.ACCURACY]:.1f}% validation, {row['seeds']} seeds  {_knobs_text(row, table.knobs)}"
            )

    print(
        "\nTrue verdict (the product's rules on the table: each configuration selected by its mean validation accuracy and "
        "judged on test accuracy, each table seed a shared seed; the selection saw those seeds' validation values, never "
        "their test values):"
    )
    print("  " + true_verdict(table).sentence)
    try:
        _print_out_of_sample(table)
    except TableError as error:  # a partial table: its seeds so far may cross-fit nothing
        print(f"\nCross-fitted verdict: none yet. {error}")
    if args.resamples:
        _print_stability(table, args.resamples)

    print("\nKnob effects per family (test accuracy points, configurations that differ in that knob alone):")
    for effect in knob_effects(configs, table.knobs):
        low, high = effect.interval
        word = "significant" if significant(effect.interval) else "not significant"
        print(
            f"  {effect.family}: {effect.knob} {knob_text(effect.low)} -> {knob_text(effect.high)}: "
            f"{effect.difference:+.2f} [{low:+.2f}, {high:+.2f}] over {effect.pairs} pairs ({word}), "
            f"{effect.flops_ratio:.2f}x the FLOPs"
        )
    return 0


def _print_out_of_sample(table: Table) -> None:
    """The cross-fitted verdict and each comparison's out-of-sample gap beside the in-sample difference."""
    select, judge = seed_sets(table)
    print(
        f"\nCross-fitted verdict (selected on seeds {_seeds_text(select)}, which every configuration has, and judged on "
        f"seeds {_seeds_text(judge)}; the conclusions replays are scored against):"
    )
    crossed, gaps = cross_fitted_verdict(table), out_of_sample(table)
    within = in_sample(table)
    for comparison in crossed.comparisons:
        label, low_high = comparison.family, comparison.interval
        gap, inside = gaps.get(label), within.get(label)
        held_out = (
            f"; held out one seed at a time {gap.gap:+.2f} [{gap.interval[0]:+.2f}, {gap.interval[1]:+.2f}] over "
            f"{gap.folds} folds, {gap.picks} distinct pick(s)"
            if gap
            else ""
        )
        print(
            f"  {label}: {comparison.difference:+.2f} [{low_high[0]:+.2f}, {low_high[1]:+.2f}] {comparison.answer} "
            f"(Holm p {comparison.adjusted_p:.3f}){held_out}; in sample {inside.difference:+.2f} {inside.answer}"
            if inside
            else f"  {label}: {comparison.difference:+.2f} {comparison.answer}{held_out}"
        )


def _seeds_text(seeds: tuple[int, ...]) -> str:
    return f"{seeds[0]}-{seeds[-1]}" if seeds == tuple(range(seeds[0], seeds[-1] + 1)) else ", ".join(map(str, seeds))


def _print_stability(table: Table, resamples: int) -> None:
    """Each comparison's power and how often resampled seeds change its pick, sign and significance."""
    print(f"\nStability of the true verdict (leave one seed out; {resamples} bootstrap resamples of the seeds, seed 0):")
    for entry in stability(table, resamples):
        comparison = entry.comparison
        loo, boot = entry.leave_one_out, entry.bootstrap
        stable = [name for name, holds in (("pick", entry.pick_stable), ("sign", entry.sign_stable)) if holds]
        stable += ["significance"] if entry.significance_stable else []
        seeds = comparison.test.seeds[0] if comparison.test else 0
        print(
            f"  {comparison.family}: {comparison.difference:+.2f} points over {seeds} "
            f"seeds (paired SD {entry.deviation:.2f}; power {entry.power:.2f} at Holm's first step, 0.8 needs "
            f"{entry.seeds_needed} seeds); leaving one seed out changes the pick in {loo.pick:.0%}, the sign in "
            f"{loo.sign:.0%}, the significance in {loo.significance:.0%}; bootstrap: {boot.pick:.0%}, {boot.sign:.0%}, "
            f"{boot.significance:.0%}; stable: {', '.join(stable) or 'nothing'}"
        )


if __name__ == "__main__":
    exit_with(main)
