"""The search strategies that replays compare (``benchmarks.truth.compare``), each a ``Search`` spelled out
whole, so that a strategy's replays stay its own when ``Search``'s defaults change."""

from __future__ import annotations

from dataclasses import replace

from benchmarks.truth.replay import Strategy
from studies.catalogue.schema import Preset
from studies.catalogue.search_strategy import NSGA2_WITH_ASHA, Search

# The default search since 2026-12-04, replayed with one look of seed repeats and with two.
_IN_BAND_WITH_ASHA = Search("random", per_family=False, untried=True, stopping_rule="median", in_band=True)

STRATEGIES = {
    strategy.name: strategy
    for strategy in (
        Strategy("today: NSGA-II, ASHA per family", NSGA2_WITH_ASHA),
        Strategy("NSGA-II, no early stopping", replace(NSGA2_WITH_ASHA, stopping_rule="none")),
        Strategy("NSGA-II untried, ASHA per family", replace(NSGA2_WITH_ASHA, untried=True)),
        Strategy("NSGA-II untried, stopping the dominated", replace(NSGA2_WITH_ASHA, untried=True, stopping_rule="dominated")),
        Strategy(
            "random, ASHA per family", Search("random", per_family=False, untried=False, stopping_rule="median", in_band=False)
        ),
        Strategy(
            "random, no early stopping", Search("random", per_family=False, untried=False, stopping_rule="none", in_band=False)
        ),
        Strategy(
            "random untried, ASHA per family",
            Search("random", per_family=False, untried=True, stopping_rule="median", in_band=False),
        ),
        Strategy(
            "random untried, no early stopping",
            Search("random", per_family=False, untried=True, stopping_rule="none", in_band=False),
        ),
        Strategy(
            "random untried, stopping the dominated",
            Search("random", per_family=False, untried=True, stopping_rule="dominated", in_band=False),
        ),
        # Multi-objective TPE fails on trials stopped early that carry a curve (optuna#5260): without early stopping only.
        Strategy(
            "TPE (multivariate, grouped), no early stopping",
            Search("tpe", per_family=False, untried=False, stopping_rule="none", in_band=False),
        ),
        Strategy(
            "TPE untried, no early stopping", Search("tpe", per_family=False, untried=True, stopping_rule="none", in_band=False)
        ),
        Strategy(
            "TPE per family untried, no early stopping",
            Search("tpe", per_family=True, untried=True, stopping_rule="none", in_band=False),
        ),
        Strategy("GP, ASHA per family", Search("gp", per_family=False, untried=False, stopping_rule="median", in_band=False)),
        Strategy(
            "GP per family untried, ASHA per family",
            Search("gp", per_family=True, untried=True, stopping_rule="median", in_band=False),
        ),
        Strategy(
            "GP per family untried, no early stopping",
            Search("gp", per_family=True, untried=True, stopping_rule="none", in_band=False),
        ),
        Strategy(
            "GP per family untried, stopping the dominated",
            Search("gp", per_family=True, untried=True, stopping_rule="dominated", in_band=False),
        ),
        Strategy(
            "random untried in the cost band, stopping the dominated",
            Search("random", per_family=False, untried=True, stopping_rule="dominated", in_band=True),
        ),
        Strategy(
            "GP per family untried in the cost band, stopping the dominated",
            Search("gp", per_family=True, untried=True, stopping_rule="dominated", in_band=True),
        ),
        Strategy("random untried in the cost band, ASHA per family", _IN_BAND_WITH_ASHA),
        # the seed repeats in two looks: 3 seeds, then the rest where a comparison is still open
        Strategy("repeats in two looks: random untried in the band, ASHA per family", _IN_BAND_WITH_ASHA, interim_seeds=3),
        # cross_head's quick search since 2026-12-06: only configurations some MHA matches in cost, 12 seed repeats
        # in two looks of 6
        Strategy(
            "matchable, repeats in two looks of 6: random untried in the band, ASHA per family",
            replace(_IN_BAND_WITH_ASHA, matchable=True),
            interim_seeds=6,
        ),
    )
}


def protocol_of(quick: Preset) -> str:
    """The name of the one strategy that searches and repeats as ``quick`` does.

    Raises:
        ValueError: No strategy, or more than one, does.
    """
    replayed = [name for name, strategy in STRATEGIES.items() if strategy.preset(quick) == quick]
    if len(replayed) != 1:
        raise ValueError(f"{len(replayed)} strategies search and repeat as this quick preset does ({quick.search}): {replayed}")
    return replayed[0]
