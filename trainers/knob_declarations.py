"""Knobs: config fields that a study may search, each declared once, where its config is.

A knob is a dataclass field made with ``knob(default, ...)``: its name is the config
field, the Optuna parameter and the report column; its metadata holds the full domain a
study may search (``choices``, or ``low``..``high``) and one line of help. The search
space (``search_space.knobs``) is derived from these fields; validation stays with the
config that owns them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import Field
from typing import Any

KNOB = "knob"  # the metadata key that marks a field as a knob


@dataclasses.dataclass(frozen=True)
class KnobSpec:
    """What a knob's field declares besides its default.

    Attributes:
        help: One line for people.
        choices: The values a study may search (or None: a range).
        low, high: The range a study may search, when ``choices`` is None.
        log: Sample the range on a log scale.
        layer_argument: Passed to the attention layer's constructor (False: a model-level
            knob of the family, such as DAMCHA's generator ``sharing``).
    """

    help: str
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    layer_argument: bool = True


def knob(
    default: Any,
    *,
    help: str,
    choices: tuple[Any, ...] | None = None,
    low: float | None = None,
    high: float | None = None,
    log: bool = False,
    layer_argument: bool = True,
) -> Any:
    """A dataclass field that is a knob (see ``KnobSpec`` for the arguments).

    Raises:
        ValueError: neither ``choices`` nor both range ends, or a default outside ``choices``.
    """
    if choices is None and (low is None or high is None):
        raise ValueError("a knob needs choices or a low..high range")
    if choices is not None and default not in choices:
        raise ValueError(f"default {default!r} is not among the choices {choices}")
    spec = KnobSpec(help, choices, low, high, log, layer_argument)
    return dataclasses.field(default=default, metadata={KNOB: spec})


def knob_fields(config: type | object) -> Iterator[Field]:
    """The knob fields of a config dataclass (inherited ones included), in declaration order."""
    return (f for f in dataclasses.fields(config) if KNOB in f.metadata)


def knob_names(config: type | object) -> tuple[str, ...]:
    """The names of ``knob_fields(config)``."""
    return tuple(f.name for f in knob_fields(config))


def spec_of(field: Field) -> KnobSpec:
    """The ``KnobSpec`` a knob field declares."""
    return field.metadata[KNOB]
