"""A run's store name, built here alone: ``<study>-<preset>-v<version>``, then what makes a run another study
(the knobs the user fixes, the training the user overrides, ``--seed``), then ``--fresh``'s time. The study of
a search's seed repeats adds its own suffix (``storage.repeats_study.repeats_study_name``)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from search_space.space import Value

FRESH_SUFFIX = "fresh-%Y%m%d-%H%M%S"  # ``--fresh``: the new study's name is the old one's with this (a time) after it


def versioned_name(name: str, preset: str, version: int) -> str:
    """``<name>-<preset>-v<version>``: a study's stable Optuna study name (a suite's report's, too); re-running the
    same command resumes it, and a new version starts a new one."""
    return f"{name}-{preset}-v{version}"


def run_store_name(versioned: str, fix: Mapping[str, Value], seed: int = 0) -> str:
    """The stable Optuna study name of a run: knobs the user fixes (and training the user overrides) make a
    different study, whose trials answer another question, and so does another ``--seed`` (other trials: a run on
    seed 1 never resumes seed 0's).

    Args:
        versioned: The study's ``versioned_name``.
        fix: The knobs fixed and the training settings overridden, by name.
        seed: The run's ``--seed``.
    """
    suffix = "".join(f"-{name}={value}" for name, value in sorted(fix.items()))
    return versioned + suffix + (f"-seed={seed}" if seed else "")


def fresh_name(name: str, now: datetime.datetime) -> str:
    """The name ``--fresh`` gives a new study beside the one named ``name``."""
    return f"{name}-{now:{FRESH_SUFFIX}}"


def longest_name_bytes(name: str) -> int:
    """The bytes of the longest name a run of the study ``name`` may take: ``--fresh``'s included."""
    return len(fresh_name(name, datetime.datetime(2000, 1, 1)).encode())
