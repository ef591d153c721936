"""The catalogue's schema: a study (its question, families, search space, objectives, budgets), a
preset, a family, a named point and a suite. Frozen data, checked as it is made, and lookups into it;
``studies.engine`` derives what a run searches (``study_space``) and runs it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from common.naming import lookup
from search_space.knobs import TRAINING_KNOBS
from search_space.space import Choice, Domain, SearchSpace, Value
from studies.catalogue.reliability import Reliability
from studies.catalogue.search_strategy import Search
from studies.catalogue.store_names import versioned_name
from studies.catalogue.tasks import TASKS, Objective, Task
from trainers.train import TrainConfig


def choices(**values: tuple[Value, ...]) -> dict[str, Domain]:
    """A preset's searched domains written as data: ``choices(d_model=(32, 64))`` is ``{"d_model": Choice((32, 64))}``."""
    return {name: Choice(tuple(options)) for name, options in values.items()}


@dataclass(frozen=True)
class DecidingSeeds:
    """More runs of an exhaustive preset's configurations where a verdict is decided: a truth
    table's judging seeds go where a matched-cost comparison can select (docs/truth.md).

    Attributes:
        seeds: Runs of each matching configuration in all (more than ``Preset.exhaustive_seeds``).
        where: A configuration matches when it holds every value of one of these mappings, a
            knob's value by the knob's name and a named point by ``point`` (its label).
        matchable: Of the other families' configurations ``where`` names, only those some baseline
            configuration matches in cost (the ones a matched-cost comparison can select, as
            ``Search.matchable`` searches them); the baseline's and the named points' all.
    """

    seeds: int
    where: tuple[Mapping[str, Value], ...]
    matchable: bool = False

    def matches(self, configuration: Mapping[str, Value], point: str | None = None) -> bool:
        """Whether a configuration (its knobs' values, and the label of the named point it trains, if any) is one
        that gets the extra runs."""
        held = dict(configuration) | {"point": point}
        return any(all(name in held and held[name] == value for name, value in where.items()) for where in self.where)


@dataclass(frozen=True)
class Preset:
    """A study's budget.

    Attributes:
        name: ``smoke``, ``quick`` or ``full``.
        description: One line: what it is for and how long it takes.
        task: The data.
        train: Training settings, the one source of every trial's (``training``): a trial
            overrides only the training knobs it sets (searched, or ``--fix``), and its seed.
        fixed: Values of model knobs the study does not search (e.g. ``num_layers``); training
            settings belong in ``train``.
        domains: Narrowed domains of searched knobs.
        trials: Default number of trials, baselines included (an exhaustive preset's table's size,
            which a run counts itself: ``studies.engine.study_space.table_grid``).
        cpus_per_trial, gpus_per_trial: Default resources of one trial.
        grace_steps: Steps a trial runs before early stopping, where its search has a rule, may stop it.
        search: How the sampler and early stopping choose (``Search``).
        repeat_seeds: Fresh seeds each family's best configurations get after the search
            (``--repeat-seeds``): the verdict's interval is over them.
        interim_seeds: 0: every seed repeat at once. ``k`` > 0 (fewer than the repeat seeds): the repeats in two
            looks, ``k`` seeds each first, the rest only for the comparisons the first look leaves undetermined
            (``studies.engine.repeats``: a group-sequential design, its error rate stated there).
        parallel_trials: Trials that run at once (fewer where the machine fits fewer). The
            run's decisions do not depend on it being reached, nor on the order trials end:
            see ``decision_lag``.
        exhaustive_seeds: 0: the sampler chooses each searched trial's configuration. ``k`` > 0:
            no sampler and no early stopping; every configuration of each family's space (its
            named points' too) trains ``k`` times, the ``i``-th time on a seed shared by every
            configuration's ``i``-th run, families in turn, each seed's pass over the whole space
            before the next (a truth table: ``benchmarks.truth``). ``trials`` is then the table's size.
        deciding: With ``exhaustive_seeds``: the configurations that train more times than the
            rest (``DecidingSeeds``), their extra passes after the whole space's.
        reliability: How often this preset's answer reaches its truth table's, on replays
            (``Reliability``); None: not measured.
        paired_deviation: The seed-to-seed standard deviation of a comparison's paired differences on this
            preset's task, in the objective's unit, as measured (the preset says where): the plan's minimum
            detectable differences assume it. None: not measured, and the plan says so.
    """

    name: str
    description: str
    task: Task
    train: TrainConfig
    fixed: Mapping[str, Value]
    domains: Mapping[str, Domain]
    trials: int
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    grace_steps: int = 1
    search: Search = Search()
    repeat_seeds: int = 3
    interim_seeds: int = 0
    parallel_trials: int = 2
    exhaustive_seeds: int = 0
    deciding: DecidingSeeds | None = None
    reliability: Reliability | None = None
    paired_deviation: float | None = None

    def __post_init__(self) -> None:
        """Training settings live in ``train`` alone (one source per setting); deciding seeds add to a table's."""
        if misplaced := sorted(set(self.fixed) & set(TRAINING_KNOBS)):
            raise ValueError(f"preset {self.name!r} sets training knobs {misplaced} in fixed; set them in its train config")
        if self.deciding is not None and self.deciding.seeds <= self.exhaustive_seeds:
            raise ValueError(
                f"preset {self.name!r}: deciding seeds ({self.deciding.seeds}) must be more than "
                f"exhaustive_seeds ({self.exhaustive_seeds})"
            )

    def repeat_looks(self, seeds: int) -> tuple[int, ...]:
        """The seeds each configuration has after each look of a run that repeats ``seeds`` fresh seeds:
        ``(interim_seeds, seeds)`` in two looks, else ``(seeds,)`` (``seeds`` 0: none)."""
        if not seeds:
            return ()
        return (self.interim_seeds, seeds) if 0 < self.interim_seeds < seeds else (seeds,)

    @property
    def decision_lag(self) -> int:
        """How far behind a trial's view of the store lags (``studies.engine.ledger``): trial ``n``
        is sampled and judged on the trials numbered below ``n - decision_lag``, all ended by then.
        Twice the parallel trials, less one: a slot rarely waits for an older trial to end."""
        return 2 * self.parallel_trials - 1

    def training(self, knobs: Mapping[str, Value]) -> TrainConfig:
        """A trial's training settings: the preset's, with the values of the training knobs among ``knobs``.

        Args:
            knobs: The knob values a trial sets (sampled, queued or fixed by the user), not defaults.

        Raises:
            ValueError: a value ``TrainConfig`` refuses.
        """
        return replace(self.train, **{name: value for name, value in knobs.items() if name in TRAINING_KNOBS})


@dataclass(frozen=True)
class Family:
    """One attention design a study compares: the knob values all its trials share.

    Attributes:
        label: How reports, the summary and the store (``family`` user attribute) name it.
        values: Knob values every trial of the family has; the sampler chooses the rest.
        baseline: The reference design the others are judged against (MHA).
    """

    label: str
    values: Mapping[str, Value]
    baseline: bool = False


@dataclass(frozen=True)
class NamedPoint:
    """A configuration every run of a study trains once, by name, as one of a family's trials
    (from that family's budget; its seed repeats and retries keep it).

    Its values are not sampler parameters: they may lie outside a preset's domains and
    set knobs the study does not search (the model configuration checks them). The
    sampler chooses the searched knobs it leaves, such as width and heads.

    Attributes:
        label: How reports and the store (``point`` user attribute) name it.
        family: The label of the family it belongs to.
        values: Its knob values.
    """

    label: str
    family: str
    values: Mapping[str, Value]


@dataclass(frozen=True)
class Study:
    """A named study.

    Attributes:
        name: Registry name (the CLI argument).
        summary: One line for ``--list``.
        doc: What question it answers, with its run command.
        space: Knobs searched and rules.
        objectives: Reported values optimised, with directions.
        families: The designs compared, the baseline among them. The budget splits evenly
            across them, and each is searched over every searched knob that applies to it.
        presets: Budgets by name.
        points: Named configurations each run trains once (``NamedPoint``).
        default_preset: The preset used without ``--preset``.
        version: Bumped when a change makes old trials incomparable.
    """

    name: str
    summary: str
    doc: str
    space: SearchSpace
    objectives: tuple[Objective, ...]
    families: tuple[Family, ...]
    presets: Mapping[str, Preset]
    points: tuple[NamedPoint, ...] = ()
    default_preset: str = "quick"
    version: int = 1

    def __post_init__(self) -> None:
        """A family may set only searched knobs, to values in their domains; exactly one is the
        baseline. Every preset trains on the same registered task, whose metric is the first objective."""
        tasks = {preset.task.name for preset in self.presets.values()}
        if len(tasks) != 1 or not tasks <= set(TASKS):
            raise ValueError(f"study {self.name!r}: its presets must share one task of {', '.join(TASKS)}, not {sorted(tasks)}")
        objective = next(iter(self.presets.values())).task.objective
        if self.objectives[0] != objective:
            raise ValueError(f"study {self.name!r}: its first objective must be its task's metric, {objective}")
        for family in self.families:
            for name, value in family.values.items():
                if name not in self.space.searched or not self.space.knobs[name].domain.contains(value):
                    raise ValueError(f"study {self.name!r}, family {family.label!r}: {name}={value!r} is not a searched value")
        if sum(family.baseline for family in self.families) != 1:
            raise ValueError(f"study {self.name!r} needs exactly one baseline family")
        families = {family.label: family for family in self.families}
        for point in self.points:
            if point.family not in families:
                raise ValueError(f"study {self.name!r}, point {point.label!r}: no family {point.family!r}")
            self.space.resolve(families[point.family].values, beyond_domains=point.values)  # knobs, conditions, rules

    @property
    def task(self) -> str:
        """The name of the task every preset trains on (a ``studies.catalogue.tasks.TASKS`` key)."""
        return next(iter(self.presets.values())).task.name

    def preset(self, name: str | None) -> Preset:
        """A preset by name (the default when None); unknown names suggest the closest."""
        return lookup(self.presets, self.default_preset if name is None else name, "preset")

    def store_name(self, preset: str) -> str:
        """The stable Optuna study name of a preset's run (``store_names.versioned_name``)."""
        return versioned_name(self.name, preset, self.version)

    def pinned_knobs(self) -> set[str]:
        """The knobs whose values the families set."""
        return {name for family in self.families for name in family.values}


@dataclass(frozen=True)
class Suite:
    """A named suite: one question asked on several tasks (the same families, knobs and budget
    on each), answered by one report with a per-task table and the cross-task average, as
    LRA reports it (``studies.engine.suite_runner.run_suite`` runs it). Each task is a study of its own,
    with its own store name.

    Attributes:
        name: Registry name (the CLI argument).
        summary: One line for ``--list``.
        doc: What question it answers, with its run command.
        studies: One study per task, by the task's title in the report's table, in its
            order; the same families and preset names in each.
        version: Bumped when a change makes old reports incomparable (the studies keep their own).
    """

    name: str
    summary: str
    doc: str
    studies: Mapping[str, Study]
    version: int = 1

    def __post_init__(self) -> None:
        """Every study compares the same families under the same preset names."""
        first, *others = self.studies.values()
        for study in others:
            if [f.label for f in study.families] != [f.label for f in first.families] or set(study.presets) != set(first.presets):
                raise ValueError(f"suite {self.name!r}: study {study.name!r} differs from {first.name!r} in families or presets")

    @property
    def default_preset(self) -> str:
        """The preset a run without ``--preset`` uses."""
        return next(iter(self.studies.values())).default_preset

    def report_name(self, preset: str) -> str:
        """The name of the suite's report (its studies keep their own store names)."""
        return versioned_name(self.name, preset, self.version)
