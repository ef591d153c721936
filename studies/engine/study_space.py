"""What a study's preset searches, derived from the catalogue's data: the preset's space, and an
exhaustive preset's table of configurations in the order they train."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from search_space.space import Choice, Domain, SearchSpace, Value
from studies.catalogue.schema import DecidingSeeds, Family, NamedPoint, Preset, Study
from studies.engine.trial_config import configuration_flops
from studies.results.matching import matched


def preset_space(study: Study, preset: Preset) -> SearchSpace:
    """The study's space narrowed to its families' values of the knobs every family sets (``attention``:
    the study's families, not every registered one), then to the preset's domains. (A training knob's
    value comes from ``Preset.training``, not from the space.)"""
    return study.space.narrowed(_family_domains(study) | dict(preset.domains))


def _family_domains(study: Study) -> dict[str, Domain]:
    """Each knob that every family sets, as a choice of the values they set, in its domain's order.

    The order (and so the store's recorded distribution) stays that of the full domain, so that a
    study's stores keep resuming when the registry gains a family.
    """
    shared = set.intersection(*(set(family.values) for family in study.families))
    domains: dict[str, Domain] = {}
    for name in shared:
        domain = study.space.knobs[name].domain
        if isinstance(domain, Choice):
            values = {family.values[name] for family in study.families}
            domains[name] = Choice(tuple(value for value in domain.values if value in values))
    return domains


@dataclass(frozen=True)
class GridEntry:
    """One trial of an exhaustive preset: a family's configuration and which of its seeds.

    Attributes:
        family: The family it belongs to.
        configuration: Every searched knob it sets (a named point's own values too).
        point: The named point it trains, or None.
        seed_index: Which of the configuration's runs (0, 1, ...).
    """

    family: Family
    configuration: Mapping[str, Value]
    point: NamedPoint | None = None
    seed_index: int = 0

    def params(self, searched: tuple[str, ...]) -> dict[str, Value]:
        """Its sampler parameters: the searched knobs it sets, less a named point's own values
        (recorded beside them, as a sampled trial of the point records them)."""
        own = set(self.point.values) if self.point else set()
        return {name: value for name, value in self.configuration.items() if name in searched and name not in own}

    def is_deciding(self, deciding: DecidingSeeds) -> bool:
        """Whether its configuration is one that ``deciding`` gives extra runs."""
        return deciding.matches(self.configuration, self.point and self.point.label)


def baseline_costs(study: Study, space: SearchSpace, cost: Callable[[Mapping[str, Value]], float | None]) -> list[float]:
    """The forward FLOPs of each configuration of the study's baseline family in ``space`` (``cost``:
    ``trial_config.configuration_flops``), where it can be built."""
    baseline = next(family for family in study.families if family.baseline)
    return [flops for config in space.configurations(baseline.values) if (flops := cost(config)) is not None]


def matchable(flops: float | None, baseline: Sequence[float]) -> bool:
    """Whether some baseline configuration (its FLOPs among ``baseline``) lies within the cost band of a
    configuration of ``flops`` (``studies.results.matching.matched``): a comparison at matched cost can select it."""
    return flops is not None and any(matched(flops / cost) for cost in baseline)


def exhaustive_grid(
    study: Study,
    space: SearchSpace,
    seeds: int,
    deciding: DecidingSeeds | None = None,
    cost: Callable[[Mapping[str, Value]], float | None] | None = None,
) -> list[GridEntry]:
    """The trials of an exhaustive preset (``Preset.exhaustive_seeds``), in the order they train.

    Seed ``i``'s pass comes before seed ``i + 1``'s; within a pass the families take turns, one
    configuration each, each family's named points first (``SearchSpace.configurations`` gives every
    family's order). The deciding configurations' extra passes come last.

    Args:
        study: The study.
        space: The preset's space (``preset_space``, narrowed by the user's ``--fix``).
        seeds: Runs of each configuration.
        deciding: Which configurations run more times, and how many in all (``Preset.deciding``).
        cost: A configuration's forward FLOPs, which ``deciding.matchable`` needs.

    Raises:
        ValueError: ``deciding.matchable`` without ``cost``.
    """
    queues: list[list[GridEntry]] = []
    for family in study.families:
        entries = [
            GridEntry(family, configuration, point)
            for point in study.points
            if point.family == family.label
            for configuration in space.configurations(dict(family.values) | dict(point.values))
        ]
        entries += [GridEntry(family, configuration) for configuration in space.configurations(family.values)]
        queues.append(entries)
    one_pass = [queue[i] for i in range(max(map(len, queues))) for queue in queues if i < len(queue)]
    grid = [replace(entry, seed_index=index) for index in range(seeds) for entry in one_pass]
    if deciding is not None:
        decisive = [entry for entry in one_pass if entry.is_deciding(deciding)]
        if deciding.matchable:
            if cost is None:
                raise ValueError("deciding seeds only where a comparison can select (matchable) need the configurations' costs")
            baseline = baseline_costs(study, space, cost)
            decisive = [
                entry
                for entry in decisive
                if entry.family.baseline or entry.point is not None or matchable(cost(entry.configuration), baseline)
            ]
        grid += [replace(entry, seed_index=index) for index in range(seeds, deciding.seeds) for entry in decisive]
    return grid


def table_grid(study: Study, space: SearchSpace, preset: Preset, fix: Mapping[str, Value] | None = None) -> list[GridEntry]:
    """An exhaustive preset's whole table (``exhaustive_grid`` with its seeds and deciding seeds; ``fix``: the
    user's values of knobs the space does not search, which its configurations' costs count)."""
    cost = configuration_flops(preset, space, fix or {})
    return exhaustive_grid(study, space, preset.exhaustive_seeds, preset.deciding, cost)
