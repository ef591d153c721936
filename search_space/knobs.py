"""Every knob a study may open, derived from the configs that declare them.

Model knobs are ``trainers.config.ModelConfig``'s knob fields (its own and every
attention family's); training knobs are ``trainers.train.TrainConfig``'s. Each field
declares its default, full domain and help once (``trainers.knob_declarations.knob``); a family's
knob exists only where ``attention`` names a family that has it. Which combinations
train is the configs' own check, so the search space and the model cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field

from search_space.space import Choice, Knob, Range, Rule, Value
from trainers.attention import ATTENTION
from trainers.config import ModelConfig
from trainers.knob_declarations import knob_fields, knob_names, spec_of
from trainers.train import TrainConfig

MODEL_KNOBS = knob_names(ModelConfig)
TRAINING_KNOBS = knob_names(TrainConfig)


def _knob(field: Field, families: tuple[str, ...]) -> Knob:
    """The search-space knob a config field declares; ``families`` name the attention variants that have it."""
    spec = spec_of(field)
    if spec.choices is not None:
        domain = Choice(spec.choices)
    else:
        integer = isinstance(field.default, int)
        domain = Range(spec.low, spec.high, log=spec.log, integer=integer)
    when = {"attention": families} if families else {}
    return Knob(field.name, domain, field.default, when, spec.help)


def _families_having(name: str) -> tuple[str, ...]:
    """The searchable attention variants whose knobs include ``name`` (none: a knob of every model)."""
    searchable = spec_of(next(f for f in knob_fields(ModelConfig) if f.name == "attention")).choices or ()
    having = tuple(family for family in searchable if name in knob_names(ATTENTION[family].Knobs))
    return having if len(having) < len(searchable) else ()


KNOBS: dict[str, Knob] = {
    field.name: _knob(field, _families_having(field.name))
    for config in (ModelConfig, TrainConfig)
    for field in knob_fields(config)
}


def _check_model(values: Mapping[str, Value]) -> None:
    """A configuration's model knobs, checked by the model config itself.

    Raises:
        ValueError: the config's own message (knob, value, what is allowed).
    """
    model = {name: value for name, value in values.items() if name in MODEL_KNOBS}
    ModelConfig.check_knobs(model)


RULES: tuple[Rule, ...] = (Rule(_check_model),)
