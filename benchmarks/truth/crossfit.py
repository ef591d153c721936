"""The truth selected out of sample: each comparison's configurations chosen on some seeds and judged on others.

The in-sample truth (``truth.true_verdict``) selects each family's configuration by its mean validation
accuracy over the same seeds that then judge it, so a pick that was lucky on those seeds is judged on its
luck (the winner's curse). Here selection and judgement never share a seed:

- **The cross-fitted verdict** (``cross_fitted_verdict``): configurations selected on the seeds every
  configuration has (``SELECTION_SEEDS``: what a replay's search reads) and judged on the seeds only
  the deciding configurations have (what its repeats read), by the product's own verdict. Its answers
  are the truth's conclusions that replays are scored against.
- **The out-of-sample gap** (``out_of_sample``): each seed held out in turn, the comparison's pair
  selected on the others and its difference read on the held-out seed; the mean over the held-out seeds,
  with a t-interval over them. What the truth estimates where it cannot decide.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmarks.truth.table import Table, TableError
from benchmarks.truth.truth import configurations, families, true_verdict, truth_frame
from storage import record
from studies.results.matching import pairings
from studies.results.statistics import mean_interval
from studies.results.verdict import Comparison, Headline, verdict


def seed_sets(table: Table) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The seeds every configuration has (selection) and the seeds only some have (judgement), in order.

    Raises:
        TableError: a table whose configurations share no seed, or none has more than those.
    """
    configs = configurations(table)
    held = [set(seeds) for seeds in configs["test_by_seed"]]
    common = set.intersection(*held) if held else set()
    extra = set().union(*held) - common
    if not common or not extra:
        raise TableError(
            "a cross-fitted truth needs seeds every configuration has and more seeds for some: build the table with "
            "its preset's deciding seeds (studies.catalogue.schema.DecidingSeeds)"
        )
    return tuple(sorted(common)), tuple(sorted(extra))


def split_configurations(configs: pd.DataFrame, select: Iterable[int], judge: Iterable[int]) -> pd.DataFrame:
    """``configs`` (``truth.configurations``) valued on ``select``'s seeds and judged on ``judge``'s.

    Returns:
        The configurations with a selection seed: ``val_accuracy`` the mean over those, ``val_by_seed`` and
        ``test_by_seed`` restricted to the judging seeds (empty for a configuration without them).
    """
    select, judge = set(select), set(judge)
    if select & judge:
        raise ValueError(f"selection and judgement share seeds {sorted(select & judge)}")
    rows = []
    for _, config in configs.iterrows():
        chosen = [config["val_by_seed"][i] for i in sorted(select) if i in config["val_by_seed"]]
        if not chosen:
            continue
        judged = {i: v for i, v in config["test_by_seed"].items() if i in judge}
        rows.append(
            config.to_dict()
            | {
                record.ACCURACY: float(np.mean(chosen)),
                "val_by_seed": {i: config["val_by_seed"][i] for i in judged},
                "test_by_seed": judged,
            }
        )
    return pd.DataFrame(rows).reset_index(drop=True)


def cross_fitted_verdict(table: Table) -> Headline:
    """The verdict selected on the selection seeds and judged on the judging seeds (``seed_sets``)."""
    select, judge = seed_sets(table)
    split = split_configurations(configurations(table), select, judge)
    return verdict(truth_frame(split, table.knobs, families(table)))


@dataclass(frozen=True)
class OutOfSample:
    """One comparison's gap out of sample.

    Attributes:
        label: The compared family or named point.
        gap: The mean held-out difference, in points (candidate less baseline).
        interval: Its 95% t-interval over the held-out seeds.
        folds: Held-out seeds that both picks had.
        picks: How many distinct candidate configurations the folds selected.
    """

    label: str
    gap: float
    interval: tuple[float, float]
    folds: int
    picks: int


def out_of_sample(table: Table) -> dict[str, OutOfSample]:
    """Each comparison's out-of-sample gap: every seed held out in turn (see the module's docstring)."""
    configs = configurations(table)
    everything = sorted(set().union(*(set(s) for s in configs["test_by_seed"])))
    differences: dict[str, list[float]] = {}
    chosen: dict[str, set[int]] = {}
    for held in everything:
        split = split_configurations(configs, [s for s in everything if s != held], [held])
        frame = truth_frame(split, table.knobs, families(table))
        for pairing in pairings(frame, families(table)):
            if pairing.candidate is None or pairing.baseline is None:
                continue
            candidate, baseline = split.iloc[pairing.candidate], split.iloc[pairing.baseline]
            if held in candidate["test_by_seed"] and held in baseline["test_by_seed"]:
                gap = 100 * (candidate["test_by_seed"][held] - baseline["test_by_seed"][held])
                differences.setdefault(pairing.label, []).append(float(gap))
                chosen.setdefault(pairing.label, set()).add(pairing.candidate)
    return {
        label: OutOfSample(label, float(np.mean(gaps)), mean_interval(np.array(gaps)), len(gaps), len(chosen[label]))
        for label, gaps in differences.items()
    }


def in_sample(table: Table) -> dict[str, Comparison]:
    """The in-sample truth's comparisons by label (``truth.true_verdict``), shown beside the cross-fitted ones."""
    return {comparison.family: comparison for comparison in true_verdict(table).comparisons}
