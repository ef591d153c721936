"""Knobs sample define-by-run with their conditions, and bad configurations are named."""

from __future__ import annotations

import optuna
import pytest

from search_space.knobs import KNOBS, RULES
from search_space.space import Choice, SearchSpace, SearchSpaceError

SPACE = SearchSpace(
    knobs=KNOBS, searched=("attention", "num_heads", "metric_rank", "generator_depth", "generator_width"), rules=RULES
)


def test_damcha_knobs_exist_only_for_damcha_trials() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(60):
        trial = study.ask()
        values = SPACE.suggest(trial)
        seen.add(values["attention"])
        damcha_knobs = {"metric_rank", "generator_depth"} & set(trial.params)
        assert bool(damcha_knobs) == (values["attention"] == "damcha")
        study.tell(trial, 0.0)
    assert seen == set(KNOBS["attention"].domain.values) >= {"mha", "damcha", "tha", "moa"}


def test_resolve_completes_with_defaults_and_drops_inactive_knobs() -> None:
    resolved = SPACE.resolve({"attention": "mha", "num_heads": 8})
    assert resolved["num_heads"] == 8 and resolved["d_model"] == KNOBS["d_model"].default
    assert "metric_rank" not in resolved
    assert SPACE.resolve({"attention": "damcha"})["metric_rank"] == KNOBS["metric_rank"].default


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"metric_rnk": 4}, "unknown knob 'metric_rnk'.*did you mean 'metric_rank'"),
        ({"metric_rank": 3}, r"knob metric_rank=3 is outside its domain: one of 1, 2, 4"),
        ({"num_layers": 2.5}, r"knob num_layers=2.5 is outside its domain: an integer in 1..12"),
        ({"attention": "mha", "metric_rank": 4}, r"knob metric_rank=4 applies only when attention in \('damcha',\)"),
        (
            {"attention": "damcha", "d_model": 32, "num_heads": 16, "metric_rank": 64},
            r"forbidden combination: metric_rank=64 must be an integer in 1..d_model=32 or 'full'",
        ),
        (
            {"d_model": 64, "num_heads": 32, "attention": "damcha", "sharing": "group:4", "num_layers": 2},
            r"forbidden combination: sharing='group:4' is not allowed; allowed: .* num_layers=2",
        ),
    ],
)
def test_bad_configurations_are_named(values: dict, message: str) -> None:
    with pytest.raises(SearchSpaceError, match=message):
        SPACE.resolve(values)


def test_narrowing_checks_the_full_domain_and_searched_knobs() -> None:
    assert SPACE.narrowed({"num_heads": Choice((2, 4))}).knobs["num_heads"].domain == Choice((2, 4))
    with pytest.raises(SearchSpaceError, match="knob num_heads=3 is outside its domain"):
        SPACE.narrowed({"num_heads": Choice((2, 3))})
    with pytest.raises(SearchSpaceError, match="knob 'sharing' is not searched"):
        SPACE.narrowed({"sharing": Choice(("layer",))})


def test_choice_does_not_confuse_types() -> None:
    assert not Choice((1, 2)).contains(True)
    assert not Choice((1, 2)).contains("1")
    assert Choice((1, "full")).contains("full")


def test_every_knob_is_declared_once_by_its_config_and_family() -> None:
    """The search space, the model config and the layers' constructors agree, because they derive from one field each."""
    import inspect

    from trainers.attention import ATTENTION, DAMCHAKnobs
    from trainers.config import ModelConfig
    from trainers.knob_declarations import knob_fields, knob_names, spec_of
    from trainers.train import TrainConfig

    assert set(KNOBS) == set(knob_names(ModelConfig)) | set(knob_names(TrainConfig))
    for field in knob_fields(DAMCHAKnobs):
        assert KNOBS[field.name].when == {"attention": ("damcha",)}
        assert KNOBS[field.name].default == field.default == getattr(ModelConfig, field.name, field.default)
    layer_arguments = {f.name for f in knob_fields(DAMCHAKnobs) if spec_of(f).layer_argument}
    for name in ("damcha", "damcha_explicit"):
        parameters = set(inspect.signature(ATTENTION[name]).parameters)
        assert layer_arguments <= parameters, f"{name} lacks {layer_arguments - parameters}"
    assert KNOBS["num_heads"].when == {} and KNOBS["learning_rate"].domain.contains(1e-3)


@pytest.mark.parametrize(
    ("domain", "typed", "meant"),
    [
        (Choice((False, True)), "true", True),
        (Choice((False, True)), "True", True),
        (Choice((False, True)), 1, True),
        (Choice((False, True)), "no", False),
        (Choice((False, True)), 0, False),
        (Choice((4, 8, 16)), 8.0, 8),
        (Choice((3e-4, 1e-3)), 0.001, 1e-3),
        (Choice(("layer", "stack")), "stack", "stack"),
        (Choice((4, 8)), "maybe", "maybe"),  # not a value of the domain: left for the domain check to refuse
    ],
)
def test_a_value_typed_on_a_command_line_means_its_domain_s_value(domain: Choice, typed: object, meant: object) -> None:
    """The class of values a command line spells differently from the domain (booleans, integral floats)."""
    got = domain.meant(typed)
    assert got == meant and type(got) is type(meant)
