"""Which of a truth table's seeds a replayed study searches on and which it judges on (``benchmarks.truth.replay``).

A table offers its replays a ``SeedPool``: the seeds every configuration has and those the deciding
configurations have (``studies.catalogue.schema.DecidingSeeds``). Each study seed draws its own ``SeedRoles``
from it (``judging_roles``): the preset's repeats, drawn at random from the deciding seeds, judge; every other
seed is the search's. The draw has a stream of its own, so every protocol scored for one study seed (a
strategy's replay, ``skill``'s references) judges on the same seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from benchmarks.truth.table import Table, TableError
from storage import record
from studies.catalogue.schema import Preset


@dataclass(frozen=True)
class SeedRoles:
    """Which of a table's seed indices one replay's search trials read and which its seed repeats read.

    Attributes:
        search: Seeds a search trial may read (each configuration its own of these, never one twice).
        judging: Seeds repeat ``k`` reads (the ``k``-th); none is a search seed.
    """

    search: tuple[int, ...]
    judging: tuple[int, ...]


@dataclass(frozen=True)
class SeedPool:
    """The seeds a table offers its replays, from which each replay draws its own ``SeedRoles``.

    Attributes:
        common: Seeds every configuration has.
        deciding: Every seed the configurations with the most seeds have (``DecidingSeeds``), ``common`` among them.
        repeats: Judging seeds a replay draws: at most ``deciding`` less ``keep``.
        keep: Common seeds a replay leaves to its search, so that a configuration without judging seeds can
            still be searched on seeds of its own (two: tried twice without reading one seed twice).
    """

    common: tuple[int, ...]
    deciding: tuple[int, ...]
    repeats: int
    keep: int

    def draw(self, rng: np.random.Generator) -> SeedRoles:
        """One replay's roles: ``repeats`` judging seeds drawn at random from ``deciding``, leaving at least
        ``keep`` of the common seeds to the search; every other seed is the search's."""
        while True:
            judging = tuple(int(s) for s in rng.choice(self.deciding, self.repeats, replace=False))
            if len(set(self.common) - set(judging)) >= self.keep:
                return SeedRoles(tuple(s for s in self.deciding if s not in judging), judging)


def seed_pool(table: Table, repeats: int) -> SeedPool:
    """The seeds ``table``'s replays draw from (``SeedPool``), ``repeats`` judging seeds each where it allows.

    Raises:
        TableError: a table whose configurations share no seed, or share only one; or one whose build has not
            finished (a configuration with more seeds than the common ones but not every deciding one).
    """
    seeds_of: dict[tuple, set[int]] = {}
    for row in table.rows.to_dict("records"):
        seeds_of.setdefault(table.configuration_of(row), set()).add(int(row[record.SEED_INDEX]))
    common = set.intersection(*seeds_of.values()) if seeds_of else set()
    if len(common) < 2:
        raise TableError("the table's configurations share fewer than two seeds: a replay cannot search and judge on it")
    most = max(len(seeds) for seeds in seeds_of.values())
    deciding = set.intersection(*(seeds for seeds in seeds_of.values() if len(seeds) == most))
    # A build trains the deciding configurations' extra seeds pass by pass: until it ends, the configurations a seed
    # ahead are the deciding ones and the rest hold none of their judging seeds. Refused here, before a replay is kept.
    unfinished = [seeds for seeds in seeds_of.values() if seeds not in (common, deciding)]
    if unfinished:
        counts = ", ".join(str(n) for n in sorted({len(seeds) for seeds in unfinished}))
        raise TableError(
            f"{len(unfinished)} of its {len(seeds_of)} configurations have {counts} seeds, neither the {len(common)} every "
            f"configuration has nor the {len(deciding)} of the ones with the most: a table whose build has not finished "
            "(it trains the deciding configurations' extra seeds pass by pass); finish it (python -m benchmarks.truth.build)"
        )
    keep = min(2, len(common) - 1) if deciding != common else 1  # two where some configuration has common seeds alone
    return SeedPool(tuple(sorted(common)), tuple(sorted(deciding)), min(repeats, len(deciding) - keep), keep)


def replay_preset(preset: Preset, table: Table) -> Preset:
    """The preset a table can replay: its seed repeats capped at the judging seeds a replay draws (``seed_pool``)."""
    return replace(preset, repeat_seeds=seed_pool(table, preset.repeat_seeds).repeats)


def judging_roles(table: Table, repeats: int, seed: int) -> SeedRoles:
    """Study seed ``seed``'s seed roles on ``table``: drawn from a stream of their own, so that every protocol
    scored for that study seed (a strategy's replay, ``no_search``) judges on the same seeds."""
    return seed_pool(table, repeats).draw(np.random.default_rng([seed, 1]))
