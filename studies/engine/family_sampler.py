"""A sampler that searches each family on its own, and can refuse configurations already tried.

A study searches several attention families in one Optuna study, the family fixed by the trial's
queued values (``studies.engine.queue.enqueue``). A sampler given the whole study pools what it
learns across families, and sees a space conditional on ``attention``: NSGA-II and GPSampler then
draw the DAMCHA-only knobs at random. ``FamilySampler`` gives each family a sampler of its own
that sees that family's trials alone (a ``StudyView``), so that its space is fixed.

Independently, with the families' configurations given (``untried``), it never proposes a
configuration the family has tried while one it has not is left: a finite space is searched
without replacement, and a family whose space is smaller than its budget is searched whole.
With their costs given too (``cost``), a family other than the baseline draws among its untried
configurations within the verdict's cost band of the best baseline trial it can see
(``studies.results.matching``), while one is left there: FLOPs are analytic, so the band is known
before a trial trains, and trials outside it are ones no matched-cost comparison selects. With ``matchable``,
it never draws (while one is left) a configuration outside the band of every baseline configuration: one that
no comparison could match in cost.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from search_space.space import SearchSpace, Value
from storage import record
from studies.catalogue.schema import Study
from studies.engine.optuna_internals import StudyView, queued_values, trials_while_sampling
from studies.engine.study_space import matchable
from studies.engine.views import in_family_view
from studies.results.matching import matched

RELATIVE_RESAMPLES = 3  # proposals of a model-based sampler before an untried configuration is drawn at random


def family_configurations(definition: Study, space: SearchSpace) -> dict[str, list[dict[str, Value]]]:
    """Each family's configurations in ``space`` (``FamilySampler``'s ``untried``), its named points aside.

    Raises:
        SearchSpaceError: a searched knob ranges over numbers (the space is not finite).
    """
    return {family.label: space.configurations(family.values) for family in definition.families}


def _family(trial: FrozenTrial) -> str | None:
    return trial.user_attrs.get(record.FAMILY)


class FamilySampler(optuna.samplers.BaseSampler):
    """Samples each trial with its family's sampler (or one shared one), optionally without replacement.

    Args:
        make: Makes a sampler from a seed.
        seed: The study's seed; a family's sampler gets one derived from it and the family's label.
        per_family: Each family its own sampler, seeing its own trials (False: one sampler sees all).
        untried: Each family's configurations (``SearchSpace.configurations`` of its values). When
            given, a trial takes a configuration that no earlier trial of its family (named points
            aside) took, while one is left; None: whatever its sampler proposes.
        cost: With ``untried`` and ``baseline``: a configuration's forward FLOPs per example (None: not
            known). A trial of another family than the baseline then takes an untried configuration within
            the cost band of the best complete baseline search trial told so far, while one is left there.
        baseline: The baseline family's label.
        baseline_costs: With ``cost``: the FLOPs of the baseline's configurations (``study_space.baseline_costs``).
            A trial of another family than the baseline then takes an untried configuration within the cost band
            of one of them (``study_space.matchable``), while one is left; None: any.
    """

    def __init__(
        self,
        make: Callable[[int], optuna.samplers.BaseSampler],
        seed: int,
        *,
        per_family: bool,
        untried: Mapping[str, Sequence[Mapping[str, Value]]] | None = None,
        cost: Callable[[Mapping[str, Value]], float | None] | None = None,
        baseline: str | None = None,
        baseline_costs: Sequence[float] | None = None,
    ) -> None:
        self._make, self._seed, self._per_family = make, seed, per_family
        self._untried, self._cost, self._baseline = untried, cost, baseline
        self._baseline_costs = baseline_costs if cost is not None else None
        self._samplers: dict[str | None, optuna.samplers.BaseSampler] = {}
        self._rng = np.random.default_rng(seed)

    def _for(self, study: optuna.Study, trial: FrozenTrial) -> tuple[optuna.samplers.BaseSampler, Any]:
        """The trial's sampler and the study as it sees it."""
        family = _family(trial) if self._per_family else None
        if family not in self._samplers:
            offset = zlib.crc32(family.encode()) if family else 0  # independent of the order families come in
            self._samplers[family] = self._make((self._seed + offset) % 2**32)
        view = StudyView(study, lambda trials: [t for t in trials if _family(t) == family]) if self._per_family else study
        return self._samplers[family], view

    def _open(self, study: optuna.Study, trial: FrozenTrial, chosen: Mapping[str, Any]) -> list[Mapping[str, Value]] | None:
        """The family's configurations that no earlier trial of it took (seed repeats, failed and infeasible
        trials count; named points do not) and that agree with ``chosen``; None when untried sampling is off."""
        grid = (self._untried or {}).get(_family(trial))
        if grid is None:
            return None
        taken = [
            other.params
            for other in trials_while_sampling(study)
            if other.number < trial.number and _family(other) == _family(trial) and record.POINT not in other.user_attrs
        ]
        open_ = [
            config
            for config in grid
            if not any(all(params.get(k) == v for k, v in config.items()) for params in taken)
            and all(config[k] == v for k, v in chosen.items() if k in config)
        ]
        if self._baseline_costs is not None and self._judged_against_baseline(trial):
            open_ = [config for config in open_ if self._matchable(config)] or open_  # all tried: the family's others
        reference = self._band_reference(study, trial)
        if reference is None:
            return open_
        in_band = [config for config in open_ if (flops := self._cost(config)) is not None and matched(flops / reference)]
        return in_band or open_  # the band's configurations all tried: the family's others

    def _judged_against_baseline(self, trial: FrozenTrial) -> bool:
        """A searched trial of a family compared with the baseline (not the baseline's, not a named point's)."""
        return _family(trial) != self._baseline and record.POINT not in trial.user_attrs

    def _matchable(self, config: Mapping[str, Value]) -> bool:
        """Whether some baseline configuration lies within the cost band of ``config`` (``_baseline_costs``)."""
        return matchable(self._cost(config), self._baseline_costs)

    def _band_reference(self, study: optuna.Study, trial: FrozenTrial) -> float | None:
        """The FLOPs of the best complete baseline search trial told before ``trial``, when ``trial`` is searched
        within its band (``cost`` given, another family than the baseline, not a named point); else None."""
        if self._cost is None or not self._judged_against_baseline(trial):
            return None
        baselines = [
            other
            for other in trials_while_sampling(study)  # the sampling cache: ``family_view`` would read the store again
            if other.state == TrialState.COMPLETE
            and in_family_view(other, self._baseline, trial.number)
            and record.POINT not in other.user_attrs
        ]
        if not baselines:
            return None
        sign = 1.0 if study.directions[0] == optuna.study.StudyDirection.MAXIMIZE else -1.0
        best = max(baselines, key=lambda other: sign * other.values[0])  # the first of equals, as Optuna's lists go
        return self._cost(best.params)

    def _chosen(self, trial: FrozenTrial) -> dict[str, Any]:
        """What the trial has so far: its queued values, then what was sampled."""
        return queued_values(trial) | trial.params

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        sampler, view = self._for(study, trial)
        return sampler.infer_relative_search_space(view, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        sampler, view = self._for(study, trial)
        values = sampler.sample_relative(view, trial, search_space)
        candidates = self._open(study, trial, self._chosen(trial))
        if not search_space or not candidates:
            return values  # nothing to choose here, or every configuration tried: the sampler's proposal
        for _ in range(RELATIVE_RESAMPLES):
            if self._open(study, trial, self._chosen(trial) | values):
                return values
            values = sampler.sample_relative(view, trial, search_space)
        config = candidates[int(self._rng.integers(len(candidates)))]
        return {name: config[name] for name in search_space if name in config}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        sampler, view = self._for(study, trial)
        value = sampler.sample_independent(view, trial, param_name, param_distribution)
        candidates = self._open(study, trial, self._chosen(trial))
        allowed = [config[param_name] for config in candidates or [] if param_name in config]
        if not allowed or value in allowed:
            return value
        return allowed[int(self._rng.integers(len(allowed)))]

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        sampler, view = self._for(study, trial)
        sampler.before_trial(view, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        sampler, view = self._for(study, trial)
        sampler.after_trial(view, trial, state, values)

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        for sampler in self._samplers.values():
            sampler.reseed_rng()
