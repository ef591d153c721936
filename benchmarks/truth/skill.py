"""What a replayed protocol gets right beyond doing no search: its answers scored against the cross-fitted
truth, beside two reference protocols that search nothing.

A comparison the truth decides (better, worse, the same within the margin) is **decided alike** when the
replay gives the same answer. A comparison the truth leaves undetermined is scored on what the truth still
estimates there, its out-of-sample gap (``crossfit.out_of_sample``): whether the replay's interval
**covers** it, and whether the replay answers **wrongly** (better or worse against the gap's sign, or the
same within the margin where the gap lies outside it). A replay is **right** when it decides alike every
comparison the truth decides and answers none wrongly, so abstaining everywhere is never right where the
truth decides anything.

The two references, judged on the same fresh seeds as every protocol replayed from the same study seed
(``seed_roles.judging_roles``):

- **No search** (``no_search_verdict``): the MHA, each family and each named point a configuration drawn at
  random within the cost band, and judged as a study judges its picks. It trains with the preset's recipe
  (``recipe_of``: lra_sharing's learning rate 1e-3; a named point keeps its own), as a study that searches
  nothing would, so it is handed the learning rate a search has to find: a strong reference, and the skill
  over it a conservative one. It draws among the configurations the table holds on every judging seed
  (the deciding ones, ``studies.catalogue.schema.DecidingSeeds``).
- **Always abstain**: every comparison undetermined, no interval.

Skill over a reference is ``(p - p0) / (1 - p0)``: the share of what the reference gets wrong that the
protocol gets right (``skill``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmarks.truth.crossfit import OutOfSample, cross_fitted_verdict, out_of_sample, split_configurations
from benchmarks.truth.scoring import agreement
from benchmarks.truth.seed_roles import judging_roles
from benchmarks.truth.table import Table, TableError
from benchmarks.truth.truth import families, truth_frame
from search_space.knobs import TRAINING_KNOBS
from storage import record
from studies.catalogue.schema import Preset
from studies.results.matching import matched
from studies.results.verdict import Headline, verdict

NO_SEARCH = "no search: a random in-band configuration per family"
ABSTAIN = "always abstain"
REFERENCES = (NO_SEARCH, ABSTAIN)
UNDETERMINED = "undetermined"


@dataclass(frozen=True)
class Referee:
    """What replays are scored against.

    Attributes:
        truth: The cross-fitted verdict (``crossfit.cross_fitted_verdict``): its answers are the conclusions.
        gaps: Each comparison's out-of-sample gap, in points, by label (``crossfit.out_of_sample``).
        margin: The equivalence margin, in points.
    """

    truth: Headline
    gaps: dict[str, OutOfSample]
    margin: float

    @classmethod
    def of(cls, table: Table) -> Referee:
        """The referee of ``table``."""
        truth = cross_fitted_verdict(table)
        measured = truth.comparisons[0].quality
        return cls(truth, out_of_sample(table), measured.scaled(measured.margin))

    @property
    def answers(self) -> dict[str, str]:
        """The truth's answer for each comparison, by label."""
        return {comparison.family: comparison.answer for comparison in self.truth.comparisons}

    def score(self, fields: Mapping[str, object]) -> dict[str, object]:
        """A replay's score from its answers (``answer_fields``): ``alike: L`` for each comparison the truth
        decides, ``covers: L`` and ``wrong: L`` for each it does not, ``decides: L`` for every one, and ``right``."""
        scored: dict[str, object] = {}
        right = True
        for label, expected in self.answers.items():
            answer = fields.get(f"answer: {label}", UNDETERMINED)
            scored[f"decides: {label}"] = answer != UNDETERMINED
            if expected != UNDETERMINED:
                scored[f"alike: {label}"] = alike = answer == expected
                right &= alike
                continue
            gap = self.gaps[label].gap
            low, high = (float(fields.get(f"{side}: {label}", math.nan)) for side in ("low", "high"))
            scored[f"covers: {label}"] = low <= gap <= high  # False without an interval
            wrong = (answer == "better" and gap < 0) or (answer == "worse" and gap > 0)
            wrong |= answer == "same" and abs(gap) > self.margin
            scored[f"wrong: {label}"] = wrong
            right &= not wrong
        return scored | {"right": right}


def answer_fields(headline: Headline) -> dict[str, object]:
    """Each comparison's answer, difference and 95% interval (points), by label: what a replay row keeps."""
    fields: dict[str, object] = {}
    for comparison in headline.comparisons:
        low, high = comparison.interval
        fields |= {
            f"answer: {comparison.family}": comparison.answer,
            f"difference: {comparison.family}": round(comparison.difference, 4),
            f"low: {comparison.family}": round(low, 4),
            f"high: {comparison.family}": round(high, 4),
        }
    return fields


def abstaining_fields(referee: Referee) -> dict[str, object]:
    """The answers of a protocol that always abstains."""
    return {f"answer: {label}": UNDETERMINED for label in referee.answers}


def recipe_of(preset: Preset, knobs: Iterable[str]) -> dict[str, object]:
    """The searched knobs that are training settings (``TRAINING_KNOBS``: the learning rate), at ``preset``'s
    values: what a study that searches nothing trains with."""
    return {name: getattr(preset.train, name) for name in knobs if name in TRAINING_KNOBS}


def no_search_verdict(
    table: Table, configs: pd.DataFrame, reference: float, repeats: int, seed: int, recipe: Mapping[str, object]
) -> Headline:
    """The verdict of a study that searches nothing (see the module's docstring), from study seed ``seed``.

    Args:
        table: The truth table.
        configs: ``configurations(table)``.
        reference: The FLOPs of the truth's reference baseline: the baseline is drawn within its band.
        repeats: The fresh seeds each pick is judged on.
        seed: The study seed: its judging seeds are every replayed protocol's of that seed.
        recipe: The training knobs' values it keeps (``recipe_of``); a named point keeps its own.

    Raises:
        TableError: no baseline configuration at the recipe holds every judging seed within the reference's band
            (a table whose deciding configurations include none).
    """
    judging = judging_roles(table, repeats, seed).judging
    rng = np.random.default_rng([seed, 2])
    at_recipe = pd.Series(True, index=configs.index)
    for name, value in recipe.items():
        at_recipe &= configs[record.POINT].notna() | (configs[name] == value)
    judged = configs[at_recipe & configs["test_by_seed"].map(lambda seeds: set(judging) <= set(seeds))]
    baselines = judged[judged["baseline"].astype(bool)]
    baselines = baselines[[matched(flops / reference) for flops in baselines[record.FLOPS]]]
    if baselines.empty:
        raise TableError(
            f"no baseline configuration at the recipe {dict(recipe)} holds the judging seeds {sorted(judging)} within the "
            "cost band of the truth's reference: the configurations with the most seeds include none, so a study that "
            "searches nothing has no baseline to be scored with; build the table with them among its deciding ones"
        )
    baseline = baselines.iloc[rng.integers(len(baselines))]
    near = judged[[matched(flops / baseline[record.FLOPS]) for flops in judged[record.FLOPS]]]
    picks = [baseline]
    others = near[~near["baseline"].astype(bool)]
    for _, group in others.groupby([others[record.FAMILY], others[record.POINT].fillna("")], sort=False):
        picks.append(group.iloc[rng.integers(len(group))])
    chosen = pd.DataFrame(picks).reset_index(drop=True)
    held = set().union(*map(set, chosen["test_by_seed"]))
    split = split_configurations(chosen, sorted(held - set(judging)), judging)  # one pick each: selection is moot
    return verdict(truth_frame(split, table.knobs, families(table)))


def skill(p: float, p0: float) -> float:
    """The share of what a reference gets wrong (``1 - p0``) that a protocol gets right beyond it (NaN: p0 = 1)."""
    return (p - p0) / (1 - p0) if p0 < 1 else math.nan


def skill_interval(right: np.ndarray, reference: np.ndarray, resamples: int = 2000) -> tuple[float, float]:
    """A 95% percentile bootstrap interval of ``skill``, the study seeds resampled together (paired).

    Args:
        right: Whether each study seed's replay was right.
        reference: Whether the reference was right on the same study seeds.
    """
    rng = np.random.default_rng(0)
    index = rng.integers(len(right), size=(resamples, len(right)))
    p, p0 = right[index].mean(axis=1), reference[index].mean(axis=1)
    values = np.where(p0 < 1, (p - p0) / np.where(p0 < 1, 1 - p0, 1), np.nan)
    values = values[~np.isnan(values)]
    return (float(np.quantile(values, 0.025)), float(np.quantile(values, 0.975))) if len(values) else (math.nan, math.nan)


class References:
    """The two reference protocols of one table, scored by its referee."""

    def __init__(self, table: Table, referee: Referee, configs: pd.DataFrame, recipe: Mapping[str, object]) -> None:
        """
        Args:
            table: The truth table.
            referee: Its referee (``Referee.of``).
            configs: ``configurations(table)``, read once by the caller.
            recipe: The training knobs' values no search keeps (``recipe_of``).
        """
        self._table, self._referee, self._configs, self._recipe = table, referee, configs, dict(recipe)
        self._reference = float(referee.truth.comparisons[0].baseline[record.FLOPS])

    def rows(self, repeats: int, seed: int) -> dict[str, dict[str, object]]:
        """Each reference's answers and score (``Referee.score``) for study seed ``seed``, by its name."""
        headline = no_search_verdict(self._table, self._configs, self._reference, repeats, seed, self._recipe)
        searched = answer_fields(headline)
        regret = agreement(self._referee.truth, headline, self._configs, self._table.knobs).regret
        abstained = abstaining_fields(self._referee)
        return {
            NO_SEARCH: searched | self._referee.score(searched) | {f"regret: {label}": v for label, v in regret.items()},
            ABSTAIN: abstained | self._referee.score(abstained),
        }
