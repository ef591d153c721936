"""A trial's model configuration: the knobs it chose, the preset's and the user's fixed values where they
apply, completed by the model's own defaults."""

from __future__ import annotations

from typing import Any

from search_space.knobs import MODEL_KNOBS
from search_space.space import SearchSpace, Value
from studies.catalogue.schema import Preset
from trainers.config import ModelConfig


def unsearched_where_active(
    space: SearchSpace, preset: Preset, fix: dict[str, Value], chosen: dict[str, Value]
) -> dict[str, Value]:
    """The preset's and the user's non-searched values, for the knobs that exist in a trial that chose ``chosen``."""
    values = dict(preset.fixed) | fix
    active = space.defaults() | chosen | values
    return {name: value for name, value in values.items() if space.knobs[name].active(active)}


def model_config_of(preset: Preset, knobs: dict[str, Value]) -> dict[str, Any]:
    """The fields of the model a trial with these resolved ``knobs`` trains on the preset's task (``ModelConfig.completed``)."""
    return ModelConfig.completed(preset.task.model_fields() | {k: v for k, v in knobs.items() if k in MODEL_KNOBS})
