"""What a study's preset searches, derived from the catalogue's data: the preset's space, and an
exhaustive preset's table of configurations in the order they train."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from search_space.space import Choice, Domain, SearchSpace, Value
from studies.catalogue.schema import DecidingSeeds, Family, NamedPoint, Preset, Study


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


def exhaustive_grid(study: Study, space: SearchSpace, seeds: int, deciding: DecidingSeeds | None = None) -> list[GridEntry]:
    """The trials of an exhaustive preset (``Preset.exhaustive_seeds``), in the order they train.

    Seed ``i``'s pass comes before seed ``i + 1``'s; within a pass the families take turns, one
    configuration each, each family's named points first (``SearchSpace.configurations`` gives every
    family's order). The deciding configurations' extra passes come last.

    Args:
        study: The study.
        space: The preset's space (``preset_space``, narrowed by the user's ``--fix``).
        seeds: Runs of each configuration.
        deciding: Which configurations run more times, and how many in all (``Preset.deciding``).
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
        grid += [replace(entry, seed_index=index) for index in range(seeds, deciding.seeds) for entry in decisive]
    return grid


def table_grid(study: Study, space: SearchSpace, preset: Preset) -> list[GridEntry]:
    """An exhaustive preset's whole table (``exhaustive_grid`` with its seeds and deciding seeds)."""
    return exhaustive_grid(study, space, preset.exhaustive_seeds, preset.deciding)
