"""Named studies as data: what is searched, against which baselines, at which budget."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import datasets

from naming import lookup
from search_space.knobs import KNOBS, RULES
from search_space.space import Choice, Domain, SearchSpace, Value
from trainers.data.listops import NUM_CLASSES as LISTOPS_CLASSES
from trainers.data.listops import ListOpsSpec
from trainers.data.tasks import listops_generated
from trainers.data.tokenize import LISTOPS_VOCABULARY
from trainers.train import TrainConfig


@dataclass(frozen=True)
class ListOpsTask:
    """Generated ListOps at one size (``trainers.data.listops``)."""

    spec: ListOpsSpec
    name: str = "listops"

    def model_fields(self) -> dict[str, Any]:
        """The ``ModelConfig`` fields the task fixes."""
        return {"vocab_size": len(LISTOPS_VOCABULARY), "num_classes": LISTOPS_CLASSES, "max_length": self.spec.max_length}

    def load(self, cache_dir: Path | None = None) -> datasets.DatasetDict:
        """The splits, built once and then memory-mapped from the cache."""
        return listops_generated(self.spec, cache_dir=cache_dir)

    def describe(self) -> dict[str, Any]:
        """Plain data naming the task and every parameter of its data."""
        return {"task": self.name, **asdict(self.spec)}


@dataclass(frozen=True)
class Objective:
    """A value every trial reports, and whether the study wants it large or small."""

    metric: str
    direction: Literal["maximize", "minimize"]


@dataclass(frozen=True)
class Preset:
    """A study's budget.

    Attributes:
        name: ``smoke``, ``quick`` or ``full``.
        description: One line: what it is for and how long it takes.
        task: The data.
        train: Training settings (its seed is replaced per trial).
        fixed: Values of knobs the study does not search (e.g. ``num_layers``).
        domains: Narrowed domains of searched knobs.
        trials: Default number of trials, baselines included.
        cpus_per_trial, gpus_per_trial: Default resources of one trial.
        grace_steps: Steps a trial runs before early stopping may stop it.
    """

    name: str
    description: str
    task: ListOpsTask
    train: TrainConfig
    fixed: Mapping[str, Value]
    domains: Mapping[str, Domain]
    trials: int
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    grace_steps: int = 1


@dataclass(frozen=True)
class Study:
    """A named study.

    Attributes:
        name: Registry name (the CLI argument).
        summary: One line for ``--list``.
        doc: What question it answers, with its run command.
        space: Knobs searched and rules.
        objectives: Reported values optimised, with directions.
        searched_values: Knob values every searched (non-baseline) trial has.
        baseline_values: Knob values of the baselines.
        baseline_grid: Searched knobs whose every value gets a baseline.
        presets: Budgets by name.
        default_preset: The preset used without ``--preset``.
        version: Bumped when a change makes old trials incomparable.
    """

    name: str
    summary: str
    doc: str
    space: SearchSpace
    objectives: tuple[Objective, ...]
    searched_values: Mapping[str, Value]
    baseline_values: Mapping[str, Value]
    baseline_grid: tuple[str, ...]
    presets: Mapping[str, Preset]
    default_preset: str = "quick"
    version: int = 1

    def preset(self, name: str | None) -> Preset:
        """A preset by name (the default when None); unknown names suggest the closest."""
        return lookup(self.presets, self.default_preset if name is None else name, "preset")

    def store_name(self, preset: str) -> str:
        """The stable Optuna study name: re-running the same command resumes it."""
        return f"{self.name}-{preset}-v{self.version}"

    def space_for(self, preset: Preset) -> SearchSpace:
        """The search space narrowed to a preset's domains."""
        return self.space.narrowed(preset.domains)

    def baselines(self, space: SearchSpace) -> list[dict[str, Value]]:
        """One baseline per combination of the grid knobs' values in ``space`` (a preset's, maybe narrowed)."""
        grids = [space.knobs[name].domain for name in self.baseline_grid]
        assert all(isinstance(domain, Choice) for domain in grids), "baseline grid knobs must be choices"
        return [
            dict(self.baseline_values) | dict(zip(self.baseline_grid, values, strict=True))
            for values in itertools.product(*(domain.values for domain in grids))
        ]


LRA_SHARING = Study(
    name="lra_sharing",
    summary="ListOps: which DAMCHA sharing, metric rank, generator depth and head count beat MHA per FLOP",
    doc="""Which sharing granularity (per layer, per group of layers, whole stack), metric rank,
generator depth and head count give DAMCHA the best validation accuracy for its forward
FLOPs on ListOps, against multi-head attention at every head count and width searched?

    python -m studies.run lra_sharing --preset quick
""",
    space=SearchSpace(
        knobs=KNOBS,
        searched=("attention", "d_model", "num_heads", "sharing", "metric_rank", "generator_depth"),
        rules=RULES,
    ),
    objectives=(Objective("val_accuracy", "maximize"), Objective("flops_per_example", "minimize")),
    searched_values={"attention": "damcha"},
    baseline_values={"attention": "mha"},
    baseline_grid=("d_model", "num_heads"),
    presets={
        preset.name: preset
        for preset in (
            Preset(
                name="smoke",
                description="a whole study in about a minute on 2 CPU cores (what the tests run)",
                task=ListOpsTask(ListOpsSpec(seed=0, min_length=10, max_length=40, train_size=512, val_size=64, test_size=64)),
                train=TrainConfig(steps=60, batch_size=16, warmup_steps=6, eval_every=20, learning_rate=3e-3),
                fixed={"num_layers": 2, "mlp_width": 64},
                domains={
                    "d_model": Choice((32,)),
                    "num_heads": Choice((2, 4)),
                    "sharing": Choice(("layer", "stack")),
                    "metric_rank": Choice((4, 8)),
                    "generator_depth": Choice((0, 1)),
                },
                trials=6,
                grace_steps=40,
            ),
            Preset(
                name="quick",
                description="short ListOps (lengths 50-250) on a 2-core laptop CPU in about 15 minutes",
                task=ListOpsTask(
                    ListOpsSpec(seed=0, min_length=50, max_length=250, train_size=9600, val_size=500, test_size=500)
                ),
                train=TrainConfig(steps=400, batch_size=32, warmup_steps=40, eval_every=100, learning_rate=2e-3),
                fixed={"num_layers": 4, "mlp_width": 128},
                domains={
                    "d_model": Choice((32, 64)),
                    "num_heads": Choice((2, 4)),
                    "sharing": Choice(("layer", "group:2", "stack")),
                    "metric_rank": Choice((4, 8, 16)),
                    "generator_depth": Choice((0, 1, 2)),
                },
                trials=24,
                grace_steps=200,
            ),
            Preset(
                name="full",
                description="LRA-scale ListOps (lengths 500-2000, 96k examples) on a GPU cluster, hundreds of trials",
                task=ListOpsTask(ListOpsSpec(seed=0)),
                train=TrainConfig(
                    steps=5000,
                    batch_size=32,
                    warmup_steps=1000,
                    eval_every=500,
                    learning_rate=5e-4,
                    weight_decay=0.1,
                    precision="bf16",
                    compile=True,
                ),
                fixed={"num_layers": 4, "mlp_width": 1024},
                domains={
                    "d_model": Choice((256, 512)),
                    "num_heads": Choice((4, 8, 16)),
                    "sharing": Choice(("layer", "group:2", "stack")),
                    "metric_rank": Choice((8, 16, 32, 64)),
                    "generator_depth": Choice((0, 1, 2)),
                },
                trials=300,
                cpus_per_trial=4,
                gpus_per_trial=1,
                grace_steps=1000,
            ),
        )
    },
)

STUDIES: dict[str, Study] = {study.name: study for study in (LRA_SHARING,)}


def get_study(name: str) -> Study:
    """A study by name.

    Raises:
        naming.UnknownNameError: "did you mean ..., available: ...".
    """
    return lookup(STUDIES, name, "study")
