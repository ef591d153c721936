"""Does the learning-rate warm-up matter at a preset's size? (Each family's learning rate is searched; warm-up is not.)

Trains lra_sharing's best quick MHA (D=64, 4 heads, learning rate 1e-3) and the authors'
configuration (D=64, 2 heads, Adam at 3e-4) with several warm-up lengths, one seed, one
thread each, two runs at once, and prints each run's final validation and test accuracy:

    python -m benchmarks.warmup                          # warm-up 0, 200 (the preset's) and 800 steps
    python -m benchmarks.warmup --warmups 100 400 --seed 7
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from dataclasses import replace

import torch

from storage import record
from studies.catalogue import LRA_SHARING
from studies.catalogue.families import AUTHORS
from studies.run import integer_from
from trainers.config import ModelConfig
from trainers.data.cache import default_cache_dir
from trainers.train import train

PRESET = LRA_SHARING.preset("quick")
RECIPES = {  # design -> (model knobs, the training knobs its recipe sets)
    "MHA": ({"attention": "mha", "d_model": 64, "num_heads": 4}, {"learning_rate": 1e-3}),
    "authors' configuration": (
        {"attention": "damcha", "metric_mode": "rowsum", "d_model": 64, "num_heads": 2}
        | {k: v for k, v in AUTHORS.values.items() if k not in ("learning_rate", "weight_decay")},
        {k: v for k, v in AUTHORS.values.items() if k in ("learning_rate", "weight_decay")},
    ),
}


def run(design: str, warmup: int, seed: int) -> tuple[str, int, float, float, float]:
    """One training run: (design, warm-up, validation accuracy, test accuracy, seconds)."""
    torch.set_num_threads(1)
    knobs, recipe = RECIPES[design]
    model = ModelConfig(**ModelConfig.completed(PRESET.task.model_fields() | dict(PRESET.fixed) | knobs))
    training = replace(PRESET.training(recipe), warmup_steps=warmup, seed=seed, device="cpu")
    start = time.perf_counter()
    metrics = train(model, training, PRESET.task.load(default_cache_dir())).metrics
    return design, warmup, metrics[record.ACCURACY], metrics[record.TEST_ACCURACY], time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.warmup", description=__doc__.splitlines()[0])
    parser.add_argument("--warmups", type=integer_from(0), nargs="+", default=[0, PRESET.train.warmup_steps, 800])
    parser.add_argument("--seed", type=integer_from(0), default=12345)
    args = parser.parse_args(argv)
    PRESET.task.load(default_cache_dir())  # built once, before the workers read it
    jobs = [(design, warmup, args.seed) for design in RECIPES for warmup in args.warmups]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        for design, warmup, val, test, seconds in pool.starmap(run, jobs):
            print(f"{design:24s} warm-up {warmup:5d}: validation {100 * val:.1f}%, test {100 * test:.1f}% ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
