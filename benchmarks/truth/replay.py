"""A whole study replayed on a truth table: the engine's own ledger asks and judges, the table trains.

A replay runs a study's ``Ledger`` (families in turn, its sampler, its early stopping, its decision
lag, its named point) and then its seed repeats (``studies.engine.repeats.plan_repeats``) on an
in-memory Optuna study. Trials train on ``Preset.parallel_trials`` simulated slots: a trial takes
its configuration's measured wall time (the median over the seeds every configuration has, trained
in one build under one load; the fraction of it that a trial stopped early ran) and reports the
table's learning curve of one of its seeds.

A replay varies the seeds as a real run does (``seed_roles``). Each study seed draws its
own judging seeds (``seed_roles.judging_roles``): the preset's repeats, drawn at random from the seeds the deciding
configurations have (``studies.catalogue.schema.DecidingSeeds``), and repeat ``k`` of every configuration
reads the ``k``-th, so repeat ``k`` shares a seed, as in a study. Every other seed is the search's: a
search trial reads one its configuration has and its search has not read, so no configuration reads one
seed twice, and no search trial reads a judging seed. A configuration without judging seeds is judged on
its seeds that no search trial of it read, and where those run out on the others; a configuration
searched more often than it has seeds reads one again: each is counted (``Replay.fallback_repeats``,
``Replay.leaked_repeats``, ``Replay.reused_search_seeds``). The preset's repeats are capped at the
judging seeds a replay can draw (``seed_roles.replay_preset``). The sampler's own time (its ``ask``) is measured
beside the trials' (``Replay.sampler_hours``).

The replay's verdict is the product's own (``studies.results.verdict``) on the replay's trial
frame, and is scored against the truth (``benchmarks.truth.truth``): the same direction and
significance per comparison, each family's regret, and the hypervolume of what the search found
against device-hours. A named point's comparison is scored against the truth's comparison of the
variant (width, heads) the replay trained (``benchmarks.truth.truth.point_truths``), as a study
trains the one its sampler draws.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import optuna
import pandas as pd

from benchmarks.truth.scoring import configuration_of, hypervolume, keyed_configurations
from benchmarks.truth.seed_roles import SeedRoles, judging_roles
from benchmarks.truth.table import Table
from benchmarks.truth.truth import configurations
from storage import record
from storage.repeats_study import open_linked_repeats
from studies.catalogue.schema import Preset, Study
from studies.catalogue.search_strategy import Search
from studies.engine.ledger import Asking, Ledger, LedgerStore, TrialSetup
from studies.engine.repeats import plan_repeats
from studies.engine.sampler import study_sampler
from studies.engine.study_space import preset_space
from studies.engine.trial_config import configuration_flops
from studies.results.frame import configuration, trials_frame
from studies.results.verdict import Headline, verdict


class ReplayStorage(optuna.storages.InMemoryStorage):
    """Optuna's in-memory storage, with the heartbeat a ledger records (nothing can go stale in a replay)."""

    def record_heartbeat(self, trial_id: int) -> None:
        """Nothing to record: a replay's driver never dies."""


@dataclass(frozen=True)
class Strategy:
    """A way to search a study's space.

    Attributes:
        name: How tables of replays name it.
        search: Its sampler, its switches and its early-stopping rule (``Preset.search``).
        interim_seeds: The seed repeats' first look (``Preset.interim_seeds``; 0: every repeat at once).
    """

    name: str
    search: Search
    interim_seeds: int = 0

    def preset(self, preset: Preset) -> Preset:
        """The preset as this strategy runs it."""
        return replace(preset, search=self.search, interim_seeds=self.interim_seeds)


@dataclass(frozen=True)
class Replay:
    """One replayed study.

    Attributes:
        seed: The study's seed (its sampler's, and the draws of its search trials' table seeds).
        frame: Its trial frame (``studies.results.frame.trials_frame``).
        headline: Its verdict.
        hypervolume: ``(device-hours, mean over families of the found share of the true hypervolume)``
            after each search trial that ended.
        device_hours: Trial-hours its search took, and its repeats.
        sampler_hours: Hours its sampler took to propose the search trials (measured here: it
            depends on the machine, unlike every other figure of a replay).
        fallback_repeats: Seed repeats of a configuration without judging seeds, read from its
            seeds that its search did not read.
        leaked_repeats: Seed repeats that read a seed its search also read (none had been left).
        reused_search_seeds: Search trials that read a seed their configuration's search had read (none was left).
        judging: The judging seeds it drew (``SeedPool.draw``).
    """

    seed: int
    frame: pd.DataFrame
    headline: Headline
    hypervolume: list[tuple[float, float]] = field(default_factory=list)
    device_hours: tuple[float, float] = (0.0, 0.0)
    sampler_hours: float = 0.0
    fallback_repeats: int = 0
    leaked_repeats: int = 0
    reused_search_seeds: int = 0
    judging: tuple[int, ...] = ()


class _Outcomes:
    """The table's rows by configuration: what a replayed trial of a configuration and seed reports, and
    which seed each trial reads (``SeedRoles``)."""

    def __init__(self, table: Table, roles: SeedRoles) -> None:
        self.knobs = table.knobs
        self.curve_steps = table.curve_steps
        self.roles = roles
        self.rows: dict[tuple, dict[int, dict]] = {}
        for row in table.rows.to_dict("records"):
            self.rows.setdefault(self._key(row[record.FAMILY], row), {})[int(row[record.SEED_INDEX])] = row
        # Each configuration's time over the seeds every one has, which one build trained under one load: the
        # deciding seeds were trained in other sittings, on a machine more or less busy.
        common = set.intersection(*(set(seeds) for seeds in self.rows.values()))
        self.wall = {
            key: float(np.median([row[record.WALL_SECONDS] for index, row in seeds.items() if index in common]))
            for key, seeds in self.rows.items()
        }
        self.searched: dict[tuple, set[int]] = {}  # configuration -> the seeds its search trials read
        self.fallbacks = self.leaks = self.reused = 0

    def seed_of(self, key: tuple, repeat_index: int | None, rng: np.random.Generator) -> int:
        """The seed index a trial of configuration ``key`` reads: a search trial (``repeat_index`` None) one of its
        search seeds it has not read, at random (where none is left, one it read: counted); repeat ``k`` the
        ``k``-th judging seed, or where the configuration lacks it, a seed its search did not read (counted),
        or failing that one it did (counted)."""
        seeds = self.rows[key]
        read = self.searched.setdefault(key, set())
        if repeat_index is None:
            own = [s for s in sorted(seeds) if s in self.roles.search]
            unread = [s for s in own if s not in read]
            if not unread:
                self.reused += 1
            index = int(rng.choice(unread or own or sorted(seeds)))
            read.add(index)
            return index
        judging = self.roles.judging[repeat_index - 1]
        if judging in seeds:
            return judging
        unread = [index for index in sorted(seeds) if index not in read]
        if len(unread) >= repeat_index:
            self.fallbacks += 1
            return unread[repeat_index - 1]
        self.leaks += 1
        return sorted(seeds)[(repeat_index - 1) % len(seeds)]

    def _key(self, family: str, values: dict) -> tuple:
        return configuration_of(family, values, self.knobs)

    def of(self, trial: optuna.trial.FrozenTrial) -> tuple[tuple, dict[int, dict]]:
        """A trial's configuration key and its table rows by seed index.

        Raises:
            KeyError: the table has no such configuration (it covers another space).
        """
        key = self._key(trial.user_attrs[record.FAMILY], configuration(trial))
        if key not in self.rows:
            raise KeyError(f"the table has no configuration {key}: it does not cover the replayed study's space")
        return key, self.rows[key]


def replay(definition: Study, preset: Preset, table: Table, strategy: Strategy, seed: int) -> Replay:
    """Replay one study of ``definition``'s ``preset`` on ``table``.

    Args:
        definition: The study (families, named points, space, objectives).
        preset: Its budget (``replay_preset``: repeats within the table's seeds).
        table: The truth table of the preset's space.
        strategy: The search strategy replayed.
        seed: The study's seed.

    Returns:
        The replayed study.
    """
    preset = strategy.preset(preset)
    space = preset_space(definition, preset)
    storage = ReplayStorage()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = optuna.create_study(
            storage=storage,
            directions=[o.direction for o in definition.objectives],
            sampler=study_sampler(preset.search, definition, space, preset.trials, seed, configuration_flops(preset, space, {})),
        )
        study.set_metric_names([o.metric for o in definition.objectives])
    study.set_user_attr(record.SEARCH_SPACE, {name: space.knobs[name].domain.describe() for name in space.searched})
    study.set_user_attr(record.BUDGET, {"families": {f.label: dict(f.values) for f in definition.families}})
    rng = np.random.default_rng(seed)
    outcomes = _Outcomes(table, judging_roles(table, preset.repeat_seeds, seed))

    def ledger(budget: int, asked: optuna.Study = study) -> Ledger:
        return Ledger(
            LedgerStore(asked, storage, search=study), Asking(definition, preset, space, budget, seed=seed), TrialSetup("")
        )

    truth = _TrueHypervolume(configurations(table), table.knobs)
    curve: list[tuple[float, float]] = []
    sampler = _Stopwatch()
    search_hours = _simulate(
        ledger(preset.trials),
        outcomes,
        rng,
        preset.parallel_trials,
        # What was found is never lost: the running maximum keeps the re-summed area's rounding (an ulp) from
        # making the curve fall.
        on_end=lambda hours: curve.append((hours, max(truth.found_share(study, outcomes), curve[-1][1] if curve else 0.0))),
        stopwatch=sampler,
    )
    repeat_hours = 0.0
    for look, seeds in enumerate(preset.repeat_looks(preset.repeat_seeds)):  # as the run's looks (``runner``)
        if plan_repeats(study, seeds, open_only=look > 0):  # queued in the search's study of repeats
            repeat_hours += _simulate(ledger(0, open_linked_repeats(study)), outcomes, rng, preset.parallel_trials)
    frame = trials_frame(study)
    return Replay(
        seed,
        frame,
        verdict(frame),
        curve,
        (search_hours, repeat_hours),
        sampler.seconds / 3600,
        outcomes.fallbacks,
        outcomes.leaks,
        outcomes.reused,
        outcomes.roles.judging,
    )


class _Stopwatch:
    """The seconds spent inside ``timing`` blocks, added up."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - started


def _simulate(
    ledger: Ledger,
    outcomes: _Outcomes,
    rng: np.random.Generator,
    slots: int,
    on_end: Callable[[float], None] | None = None,
    stopwatch: _Stopwatch | None = None,
) -> float:
    """Run a ledger's trials on ``slots`` simulated slots until it has nothing left.

    Args:
        stopwatch: Times each ``ask`` (the sampler's proposal), when given.

    Returns:
        The trial-hours the trials took.
    """
    clock, used, running = 0.0, 0.0, []  # running: (end time, number, last report)
    objective = ledger.objective.metric
    stopwatch = stopwatch or _Stopwatch()
    while True:
        while len(running) < slots:
            with stopwatch.timing():
                spec = ledger.ask(f"replay-{len(ledger.study.trials)}")
            if spec is None:
                break
            number = spec.number
            trial = ledger.study.get_trials(deepcopy=False)[number]
            key, seeds = outcomes.of(trial)
            row = seeds[outcomes.seed_of(key, trial.user_attrs.get(record.REPEAT_INDEX), rng)]
            last: dict = {}
            for step in outcomes.curve_steps:
                value = float(row[f"val_accuracy_at_{step}"])
                final = step == outcomes.curve_steps[-1]
                last = {"step": step, objective: value, "final": final}
                stops = not final and ledger.stops(number, step, value)
                ledger.record_report(number, last)
                if stops:
                    break
            fraction = last["step"] / outcomes.curve_steps[-1]
            last |= {
                record.FLOPS: float(row[record.FLOPS]),
                record.PARAMETERS: int(row[record.PARAMETERS]),
                record.WALL_SECONDS: outcomes.wall[key] * fraction,
            }
            if last["final"]:
                last |= {record.TEST_ACCURACY: float(row[record.TEST_ACCURACY]), record.ACCURACY: float(row[record.ACCURACY])}
            running.append((clock + last[record.WALL_SECONDS], number, last))
        if not running:
            if not ledger.done():
                raise RuntimeError("the replayed ledger neither asks nor ends: a view waits for a trial that never runs")
            return used / 3600
        running.sort(key=lambda item: item[0])
        end, number, last = running.pop(0)
        clock, used = end, used + last[record.WALL_SECONDS]
        ledger.finish(number, last, None)
        if on_end is not None:
            on_end(used / 3600)


class _TrueHypervolume:
    """Each family's true hypervolume (true test accuracy up, FLOPs down) and the share of it a search found."""

    def __init__(self, configs: pd.DataFrame, knobs: list[str]) -> None:
        self.reference = (float(configs[record.TEST_ACCURACY].min()), float(configs[record.FLOPS].max()) * 1.01)
        self.truth = {
            key: (float(row[record.TEST_ACCURACY]), float(row[record.FLOPS]))
            for key, row in keyed_configurations(configs, knobs).items()
        }
        self.whole = {
            family: hypervolume([v for k, v in self.truth.items() if k[0] == family], self.reference)
            for family in configs[record.FAMILY].unique()
        }

    def found_share(self, study: optuna.Study, outcomes: _Outcomes) -> float:
        """The mean over families of the share of its true hypervolume that its complete search runs cover."""
        found: dict[str, set] = {family: set() for family in self.whole}
        for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            if record.REPEAT_OF not in trial.user_attrs:
                key, _ = outcomes.of(trial)
                found[key[0]].add(key)
        shares = [
            hypervolume([self.truth[key] for key in keys], self.reference) / self.whole[family]
            for family, keys in found.items()
            if self.whole[family] > 0
        ]
        return float(np.mean(shares)) if shares else 0.0
