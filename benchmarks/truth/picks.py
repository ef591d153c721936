"""What replayed studies compare: the baseline configuration each comparison of a study's verdict reads, and
what it answers against it.

    python -m benchmarks.truth.picks --study cross_head                 # 100 replays of its quick protocol
    python -m benchmarks.truth.picks --study cross_head --trials 64     # at another budget

A comparison's answer depends on the pair it compares as much as on the families: a study compares each family's
pick with its best baseline (by the search's validation) or with the best baseline searched at the pick's cost,
and which baseline configurations a search tried, and which of two near-tied ones its seeds favour, moves every
comparison made against it. For each comparison this prints the baseline configurations the studies compared
it with, how often, and the answers they gave there, the cross-fitted truth's pair (what replays are scored
against) marked; and how often each baseline configuration is a study's best. Replays are those of
``benchmarks.truth.compare`` (the same seeds give the same studies); nothing is written.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

import optuna
import pandas as pd

from benchmarks.truth.crossfit import cross_fitted_verdict
from benchmarks.truth.replay import replay
from benchmarks.truth.seed_roles import replay_preset
from benchmarks.truth.strategies import STRATEGIES, protocol_of
from benchmarks.truth.table import Table, TableError, add_table_arguments, chosen_table, load
from common.outputs import exit_with
from studies.catalogue.schema import Preset, Study
from studies.engine.options import StudyOptionError, check_trials_cover_families
from studies.results.verdict import Comparison, Headline

NOT_MATCHED = " (not matched in cost)"


def configuration_words(row: pd.Series, knobs: list[str]) -> str:
    """A configuration's searched knobs as ``knob=value`` words, the attention family left out."""
    return " ".join(f"{knob}={row[knob]}" for knob in knobs if knob != "attention" and knob in row and pd.notna(row[knob]))


def baseline_of(comparison: Comparison, knobs: list[str]) -> str:
    """The baseline configuration a comparison reads, flagged when it lies outside the candidate's cost band."""
    return configuration_words(comparison.baseline, knobs) + ("" if comparison.pairing.matched else NOT_MATCHED)


def best_baseline(headline: Headline, knobs: list[str]) -> str:
    """The best baseline configuration a verdict compares with ("" if none)."""
    for comparison in headline.comparisons:
        if comparison.pairing.at_best_baseline:
            return configuration_words(comparison.baseline, knobs)
    return ""


@dataclass
class Picks:
    """What replayed studies compared.

    Attributes:
        best: How many studies took each best baseline configuration.
        compared: For each comparison (by label), how many studies compared it with each baseline configuration
            and gave each answer there: ``(baseline, answer)`` counts.
    """

    best: Counter = field(default_factory=Counter)
    compared: defaultdict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, headline: Headline, knobs: list[str]) -> None:
        """Count one study's verdict."""
        self.best[best_baseline(headline, knobs)] += 1
        for comparison in headline.comparisons:
            if comparison.pairing.candidate is not None:
                self.compared[comparison.family][baseline_of(comparison, knobs), comparison.answer] += 1


def picks(definition: Study, preset: Preset, table: Table, strategy: str, seeds: range) -> Picks:
    """Replay studies and count what their verdicts compare.

    Args:
        definition: The study replayed.
        preset: Its budget (``replay_preset``: repeats within the table's seeds).
        table: Its truth table.
        strategy: The name of the strategy replayed (``STRATEGIES``).
        seeds: The study seeds replayed.

    Returns:
        The counts (``Picks``).
    """
    counted = Picks()
    for seed in seeds:
        counted.add(replay(definition, preset, table, STRATEGIES[strategy], seed).headline, table.knobs)
    return counted


def report(counted: Picks, truth: Headline, knobs: list[str], studies: int) -> list[str]:
    """The lines ``main`` prints: the best baselines, then each comparison's baselines and answers.

    Args:
        counted: What the replays compared.
        truth: The verdict whose pairs are marked (the cross-fitted truth's).
        knobs: The table's knobs, to name configurations.
        studies: How many studies were counted.
    """

    def share(count: int) -> str:
        return f"{count / studies:6.1%}"

    truths = best_baseline(truth, knobs)
    lines = ["best baseline configuration (share of studies; * the cross-fitted truth's):"]
    lines += [f"  {'*' if words == truths else ' '} {share(n)}  {words or '(none)'}" for words, n in counted.best.most_common()]
    lines.append("each comparison: the baseline configurations it was compared with (share of studies), and its answers there:")
    for comparison in truth.comparisons:
        theirs = baseline_of(comparison, knobs)
        lines.append(f"  {comparison.family} (the truth: {comparison.answer} against {theirs})")
        by_baseline: defaultdict[str, Counter] = defaultdict(Counter)
        for (baseline, answer), n in counted.compared[comparison.family].items():
            by_baseline[baseline][answer] += n
        for baseline, answers in sorted(by_baseline.items(), key=lambda item: -item[1].total()):
            said = ", ".join(f"{answer} {n}" for answer, n in answers.most_common())
            lines.append(f"    {'*' if baseline == theirs else ' '} {share(answers.total())}  {baseline}: {said}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.truth.picks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_table_arguments(parser)
    parser.add_argument("--replays", type=int, default=100, help="studies replayed (seeds 0 .. N-1; default 100)")
    parser.add_argument("--trials", type=int, help="trials of each replayed study (default: the quick preset's)")
    args = parser.parse_args(argv)
    if args.replays < 1:
        parser.error(f"--replays must be 1 or more, got {args.replays}")
    definition, path = chosen_table(parser, args)
    quick = definition.preset("quick")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    try:
        table = load(path)
        preset = quick
        if args.trials is not None:
            check_trials_cover_families(definition, args.trials)
            preset = replace(quick, trials=args.trials)
        strategy = protocol_of(quick)
        counted = picks(definition, replay_preset(preset, table), table, strategy, range(args.replays))
    except (TableError, StudyOptionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{args.replays} replays of {strategy!r} at {preset.trials} trials on {path.name}")
    print("\n".join(report(counted, cross_fitted_verdict(table), table.knobs, args.replays)))
    return 0


if __name__ == "__main__":
    exit_with(main)
