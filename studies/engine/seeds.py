"""The seed layout: which seed a trial trains on, so that a run's trials, its seed repeats and a truth
table's runs never share one, and repeat ``k`` (or table run ``i``) of every configuration shares one."""

from __future__ import annotations

import optuna

from storage import record

SEEDS_PER_RUN = 100_000  # trial n of a run with --seed s trains on s * SEEDS_PER_RUN + n
FRESH_SEEDS_FROM = 90_000  # repeat k trains on seed * 100_000 + FRESH_SEEDS_FROM + k (trial numbers stay below)
TABLE_SEEDS_FROM = 80_000  # an exhaustive table's run i of every configuration: seed * 100_000 + TABLE_SEEDS_FROM + i


def seed_offset(trial: optuna.Trial) -> int:
    """Trial ``n``'s seed, less the run's: ``n``; a seed shared by every configuration's ``k``-th
    seed repeat, or by every configuration's ``i``-th run in an exhaustive table."""
    if (repeat := trial.user_attrs.get(record.REPEAT_INDEX)) is not None:
        return FRESH_SEEDS_FROM + repeat
    if (index := trial.user_attrs.get(record.SEED_INDEX)) is not None:
        return TABLE_SEEDS_FROM + index
    return trial.number
