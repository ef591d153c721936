"""Whether the verdict's "the same within ±m" can be reached, simulated with a truth table's seed-to-seed spread.

    python -m benchmarks.truth.reachable                     # lra_sharing's table: the undetermined comparison's spread
    python -m benchmarks.truth.reachable --study cross_head  # another study's table

For each true gap and number of fresh seeds, many studies' paired differences are drawn from a normal
distribution with the truth's paired standard deviation, and each is answered as the verdict answers a
comparison whose other comparisons are clearly decided (``studies.results.verdict``): "better"/"worse"
where the paired t-test's p is below 0.05 (Holm's last step), "the same" where two one-sided tests' p is
below 0.05 and no difference was found, else undetermined. Beside it, the rule before 2026-12-05 (Holm
across the equivalence tests too: the p-value tripled beside two comparisons far from the margin). A gap
at the margin shows the error rate of "same"; a gap of zero, what seeds it needs.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from benchmarks.truth.table import TableError, add_table_arguments, chosen_table, load
from benchmarks.truth.truth import true_verdict
from common.outputs import exit_with
from studies.results.statistics import LEVEL, equivalence_p, paired_test
from studies.results.verdict import Comparison

GAPS = (0.0, 0.5, 1.0)  # points: level, half the ±1-point margin, at the margin
SEEDS = (6, 9, 12, 18, 24)
MARGIN = 1.0
ALPHA = 1 - LEVEL


def paired_deviation(comparison: Comparison) -> float:
    """The standard deviation (points) of a comparison's paired fresh-seed differences."""
    candidate, baseline = comparison.candidate["fresh"], comparison.baseline["fresh"]
    shared = sorted(set(candidate) & set(baseline))
    return 100 * float(np.std([candidate[k] - baseline[k] for k in shared], ddof=1))


def answers(gap: float, deviation: float, seeds: int, studies: int, rng: np.random.Generator) -> dict[str, float]:
    """How often simulated comparisons answer each way, under the verdict's rule and the former one.

    Returns:
        Shares of ``studies``: ``same``, ``same (Holm across equivalence, 3 comparisons)``, ``a difference``.
    """
    same = same_before = different = 0
    zeros = np.zeros(seeds)
    for _ in range(studies):
        differences = rng.normal(gap, deviation, seeds)
        significant = paired_test(differences, zeros).p_value < ALPHA
        p_same = equivalence_p(differences, zeros, MARGIN, paired=True)
        different += significant
        same += not significant and p_same < ALPHA
        same_before += not significant and min(1.0, 3 * p_same) < ALPHA
    return {
        "same": same / studies,
        "same (Holm across equivalence, 3 comparisons)": same_before / studies,
        "a difference": different / studies,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.truth.reachable", description=__doc__)
    add_table_arguments(parser)
    parser.add_argument("--studies", type=int, default=4000, help="simulated studies per gap and seed count")
    args = parser.parse_args(argv)
    try:
        table = load(chosen_table(parser, args)[1])
    except TableError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    undetermined = [c for c in true_verdict(table).comparisons if c.answer == "undetermined"]
    if not undetermined:
        print("error: the truth decides every comparison: nothing to simulate", flush=True)
        return 2
    comparison = undetermined[0]
    deviation = paired_deviation(comparison)
    rng = np.random.default_rng(0)
    rows = [
        {"true gap (points)": gap, "fresh seeds": str(seeds)} | answers(gap, deviation, seeds, args.studies, rng)
        for gap in GAPS
        for seeds in SEEDS
    ]
    print(f"{comparison.family}: paired SD {deviation:.2f} points, margin ±{MARGIN:g}, {args.studies} studies a row")
    print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3f"))
    return 0


if __name__ == "__main__":
    exit_with(main)
