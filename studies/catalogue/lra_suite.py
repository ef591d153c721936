"""lra_suite: the five Long Range Arena tasks from the release files, one study per task, one report.

Version history: docs/changelog.md.
"""

from __future__ import annotations

from dataclasses import replace

from studies.catalogue.families import ACCURACY_AND_FLOPS, AUTHORS, AUTHORS_CAUSAL, CAUSAL_LRA_TASKS, DAMCHA_FAMILIES, MHA
from studies.catalogue.lra_sharing import LRA_SHARING
from studies.catalogue.schema import Preset, Study, Suite, choices
from studies.catalogue.tasks import ReleaseTask
from trainers.train import TrainConfig

LRA_TASKS = {  # the Long Range Arena tasks, by their name in the suite's table, as LRA orders them
    "ListOps": "lra_listops",
    "Text": "lra_text",
    "Retrieval": "lra_retrieval",
    "Image": "lra_image",
    "Pathfinder": "lra_pathfinder",
}


def _lra_suite_study(title: str, task: str) -> Study:
    """DAMCHA (both metric modes) against MHA on one LRA task from its release files: one study of ``lra_suite``."""
    release = ReleaseTask(task)
    return Study(
        name=f"lra_suite_{task.removeprefix('lra_')}",
        summary=f"LRA {title}: DAMCHA (both metric modes) against MHA per FLOP (a study of lra_suite)",
        doc=f"""On LRA {title}, read from the release files, does DAMCHA (the authors' metric or the
cross-head one) reach higher validation accuracy than multi-head attention for its forward FLOPs,
each family searched over width, heads and (DAMCHA) metric rank, generator depth and sharing?

    python -m studies.run lra_suite --data-dir DIR
""",
        space=LRA_SHARING.space,  # the same knobs
        objectives=ACCURACY_AND_FLOPS,
        families=(MHA, *DAMCHA_FAMILIES),
        points=(AUTHORS_CAUSAL if task in CAUSAL_LRA_TASKS else AUTHORS,),
        version=3,
        presets={
            preset.name: preset
            for preset in (
                Preset(
                    name="smoke",
                    description="one trial per family on tiny release-format files in seconds (what the tests run)",
                    task=release,
                    train=TrainConfig(steps=12, batch_size=8, warmup_steps=2, eval_every=6, learning_rate=1e-3),
                    fixed={"num_layers": 1, "mlp_width": 64},
                    domains=choices(
                        d_model=(32,),
                        num_heads=(2,),
                        sharing=("layer",),
                        metric_rank=(4,),
                        generator_depth=(0,),
                        learning_rate=(1e-3,),
                    ),
                    trials=3,
                    grace_steps=12,
                    repeat_seeds=2,
                ),
                Preset(
                    name="quick",
                    description="small models at LRA's sequence lengths on a CPU machine: hours per task (not yet measured)",
                    task=release,
                    train=TrainConfig(steps=1000, batch_size=16, warmup_steps=100, eval_every=250, learning_rate=1e-3),
                    fixed={"num_layers": 2, "mlp_width": 128},
                    domains=choices(
                        d_model=(32, 64),
                        num_heads=(2, 4),
                        sharing=("layer", "stack"),
                        metric_rank=(4, 8, 16),
                        generator_depth=(0, 1),
                        learning_rate=(3e-4, 1e-3),
                    ),
                    trials=12,
                    grace_steps=500,
                    repeat_seeds=3,
                ),
                Preset(
                    name="full",
                    description="LRA-scale models on a GPU cluster: 60 trials per task",
                    task=release,
                    train=replace(LRA_SHARING.preset("full").train, steps=10_000, eval_every=1000),  # bf16, compiled
                    fixed={"num_layers": 4, "mlp_width": 1024},
                    domains=choices(
                        d_model=(128, 256),
                        num_heads=(4, 8),
                        sharing=("layer", "group:2", "stack"),
                        metric_rank=(8, 16, 32),
                        generator_depth=(0, 1, 2),
                        learning_rate=(2.5e-4, 5e-4, 1e-3),
                    ),
                    trials=60,
                    cpus_per_trial=4,
                    gpus_per_trial=1,
                    grace_steps=3000,
                    repeat_seeds=5,
                    parallel_trials=8,
                ),
            )
        },
    )


LRA_SUITE = Suite(
    name="lra_suite",
    summary="all five LRA tasks from the release files: DAMCHA (both metric modes) against MHA, per task and on average",
    doc="""On each of the five Long Range Arena tasks (ListOps, Text, Retrieval, Image, Pathfinder),
read from the release files, does DAMCHA (the authors' metric or the cross-head one) reach
higher validation accuracy than multi-head attention for its forward FLOPs, and which family
leads on average across the tasks, as LRA reports it?

    python -m studies.run lra_suite --data-dir /path/to/lra_release
""",
    studies={title: _lra_suite_study(title, task) for title, task in LRA_TASKS.items()},
)
