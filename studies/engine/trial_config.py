"""A trial's model configuration: the knobs it chose, the preset's and the user's fixed values where they
apply, completed by the model's own defaults."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from search_space.knobs import MODEL_KNOBS
from search_space.space import SearchSpace, SearchSpaceError, Value
from studies.catalogue.schema import Preset
from studies.catalogue.tasks import Task
from trainers.config import ModelConfig
from trainers.costs import model_flops
from trainers.train import TrainConfig


def unsearched_where_active(
    space: SearchSpace, preset: Preset, fix: dict[str, Value], chosen: dict[str, Value]
) -> dict[str, Value]:
    """The preset's and the user's non-searched values, for the knobs that exist in a trial that chose ``chosen``."""
    values = dict(preset.fixed) | fix
    active = space.defaults() | chosen | values
    return {name: value for name, value in values.items() if space.knobs[name].active(active)}


def resolved_knobs(
    space: SearchSpace,
    preset: Preset,
    fix: Mapping[str, Value],
    chosen: Mapping[str, Value],
    beyond_domains: Mapping[str, Value] | None = None,
) -> dict[str, Value]:
    """A configuration's every active knob: the values ``chosen`` for it, the preset's and the user's fixed values
    where they apply, then defaults (``SearchSpace.resolve``).

    Raises:
        SearchSpaceError: a value outside its domain, or a combination the space's rules forbid.
    """
    chosen = dict(chosen)
    return space.resolve(chosen | unsearched_where_active(space, preset, dict(fix), chosen), beyond_domains=beyond_domains)


@dataclass(frozen=True)
class TrialSpec:
    """What crosses into a trial's worker (``studies.engine.trainable.train_trial``): one trial, exactly.

    Attributes:
        number: The trial's number in its Optuna study.
        model: The fields of its ``ModelConfig`` (``model_config_of``); the worker builds the model, so a
            configuration the task cannot build fails its trial, saying why, not the driver.
        train: Its training settings, its seed among them (the device is the worker's placement's).
        task: The preset's task, whose splits the worker loads.
        cache_dir: The data cache the driver built (the worker memory-maps its splits).
        compile_cache_dir: The compile cache the run's trials share.
        memory_bytes: Its host-memory budget (None: none).
    """

    number: int
    model: Mapping[str, Any]
    train: TrainConfig
    task: Task
    cache_dir: str
    compile_cache_dir: str
    memory_bytes: int | None = None


def trial_spec(
    preset: Preset,
    knobs: dict[str, Value],
    seed: int,
    *,
    number: int,
    cache_dir: str,
    compile_cache_dir: str,
    memory_bytes: int | None = None,
    training: TrainConfig | None = None,
) -> TrialSpec:
    """A trial's ``TrialSpec``: its model and training settings, the preset's task and where the caches lie.

    Args:
        preset: The preset the trial belongs to.
        knobs: Its resolved knobs (``resolved_knobs``).
        seed: The trial's seed.
        number: Its number in its study.
        cache_dir: The data cache the driver built.
        compile_cache_dir: The compile cache the run's trials share.
        memory_bytes: The trial's host-memory budget (None: none).
        training: Its training settings, where the caller has them (default: ``preset.training(knobs)``).
    """
    training = preset.training(knobs) if training is None else training
    return TrialSpec(
        number=number,
        model=model_config_of(preset, knobs),
        train=replace(training, seed=seed),
        task=preset.task,
        cache_dir=cache_dir,
        compile_cache_dir=compile_cache_dir,
        memory_bytes=memory_bytes,
    )


# Ray Tune hands its trainable a dict: the spec is its one entry.
_SPEC_KEY = "trial"


def tune_config(spec: TrialSpec) -> dict[str, TrialSpec]:
    """The configuration Ray Tune carries to the trial's worker."""
    return {_SPEC_KEY: spec}


def spec_of(config: Mapping[str, Any]) -> TrialSpec:
    """The ``TrialSpec`` in a Ray Tune trial's configuration (``tune_config``)."""
    return config[_SPEC_KEY]


def model_config_of(preset: Preset, knobs: dict[str, Value]) -> dict[str, Any]:
    """The fields of the model a trial with these resolved ``knobs`` trains on the preset's task (``ModelConfig.completed``)."""
    return ModelConfig.completed(preset.task.model_fields() | {k: v for k, v in knobs.items() if k in MODEL_KNOBS})


def forward_flops(preset: Preset, knobs: dict[str, Value]) -> float | None:
    """Analytic forward FLOPs per example of the model a trial with these resolved ``knobs`` trains
    (None: a model the task cannot build; its worker fails the trial, saying why)."""
    try:
        config = ModelConfig(**model_config_of(preset, knobs))
    except ValueError:
        return None
    return float(model_flops(config, config.max_length).forward)


def configuration_flops(
    preset: Preset, space: SearchSpace, fix: Mapping[str, Value]
) -> Callable[[Mapping[str, Value]], float | None]:
    """The forward FLOPs per example of a configuration of ``space`` (its searched and family values),
    known before it trains: completed as ``Ledger.ask`` completes a trial's (the preset's and the user's
    fixed values, then defaults). None for one the space's rules forbid or the task cannot build."""

    known: dict[frozenset[tuple[str, Value]], float | None] = {}  # a plain dict, unlike functools.cache: it pickles

    def flops(config: Mapping[str, Value]) -> float | None:
        key = frozenset(config.items())
        if key not in known:
            try:
                knobs = resolved_knobs(space, preset, fix, config)
            except SearchSpaceError:
                known[key] = None
            else:
                known[key] = forward_flops(preset, knobs)
        return known[key]

    return flops
