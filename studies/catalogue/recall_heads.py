"""recall_heads: does cross-head mixing let fewer or narrower heads recall more pairs per FLOP than MHA.

Its quick preset cannot decide that: MQAR at a CPU's size recalls or not by seed (docs/results.md), so what
it answers is which designs start to recall within 4000 steps at MHA's cost, and how far apart their seeds
land; the comparison itself is the full preset's (20,000 steps, a GPU). Its plan says what the quick seeds
can detect.

Version history: docs/changelog.md.
"""

from __future__ import annotations

from dataclasses import replace

from search_space.knobs import KNOBS, RULES
from search_space.space import SearchSpace
from studies.catalogue.families import ACCURACY_AND_FLOPS, AUTHORS, DAMCHA_FAMILIES, MHA
from studies.catalogue.schema import Preset, Study, choices
from studies.catalogue.tasks import RecallTask
from trainers.data.recall import RecallSpec
from trainers.train import TrainConfig

# MQAR at three sizes (cross_head's presets until its v5 moved to ListOps): the data, model and budget per trial.
MQAR_SMOKE = Preset(
    name="smoke",
    description="a whole study, short trials of small models (what the tests run)",
    task=RecallTask(RecallSpec(seed=0, vocab_size=16, seq_len=16, num_pairs=2, num_examples=256), val_examples=64),
    train=TrainConfig(steps=40, batch_size=16, warmup_steps=4, eval_every=20, learning_rate=1e-3),
    fixed={"num_layers": 2, "mlp_width": 64, "metric_chunk": 4},
    domains={},
    trials=6,
    grace_steps=40,  # = steps: no early stopping (MQAR accuracy jumps late)
    repeat_seeds=2,
)
MQAR_QUICK = Preset(
    name="quick",
    description="MQAR (4 pairs in 32 tokens) on a 2-core laptop CPU, seed repeats included",
    task=RecallTask(RecallSpec(seed=0, vocab_size=64, seq_len=32, num_pairs=4, num_examples=16_000), val_examples=500),
    train=TrainConfig(steps=2000, batch_size=64, warmup_steps=200, eval_every=500, learning_rate=1e-3),
    fixed={"num_layers": 2, "mlp_width": 64, "metric_chunk": 8},
    domains={},
    trials=12,
    grace_steps=2000,  # = steps: no early stopping (MQAR accuracy jumps late)
)
MQAR_FULL = Preset(
    name="full",
    description="Zoology-scale MQAR (32 pairs in 256 tokens, vocabulary 8192) on a GPU cluster, hundreds of trials",
    task=RecallTask(RecallSpec(seed=0, vocab_size=8192, seq_len=256, num_pairs=32, num_examples=100_000), val_examples=3000),
    train=TrainConfig(
        steps=20_000,
        batch_size=64,
        warmup_steps=1000,
        eval_every=1000,
        learning_rate=1e-3,
        weight_decay=0.1,
        precision="bf16",
        compile=True,
    ),
    fixed={"num_layers": 2, "mlp_width": 512, "metric_chunk": 64},
    domains={},
    trials=240,
    cpus_per_trial=4,
    gpus_per_trial=1,
    grace_steps=10_000,
    repeat_seeds=5,
    parallel_trials=8,
)

RECALL_HEADS = Study(
    name="recall_heads",
    summary="MQAR: does cross-head mixing let fewer or narrower heads recall more pairs per FLOP than MHA "
    "(quick: which designs start to recall, by seed; full: decided)",
    doc="""Does DAMCHA's cross-head mixing let fewer or narrower heads recall more key-value pairs
than multi-head attention at the same forward FLOPs, on multi-query associative recall?
Both are searched over head count and width, DAMCHA also over metric rank, sharing and
generator depth.

The quick preset cannot decide it: at its size a run recalls or stalls by seed (paired SD about
52 points), so its answer is which designs start to recall within 4000 steps and how their seeds
spread (--plan prints what its seeds can detect). The full preset (20,000 steps, a GPU) decides.

    python -m studies.run recall_heads --preset quick
""",
    space=SearchSpace(
        knobs=KNOBS,
        searched=(
            "attention",
            "metric_mode",
            "d_model",
            "num_heads",
            "metric_rank",
            "sharing",
            "generator_depth",
            "learning_rate",
        ),
        rules=RULES,
    ),
    objectives=ACCURACY_AND_FLOPS,
    families=(MHA, *DAMCHA_FAMILIES),
    points=(AUTHORS,),
    version=5,
    presets={
        "smoke": replace(
            MQAR_SMOKE,
            domains=choices(
                d_model=(32,),
                num_heads=(1, 2),
                metric_rank=(4,),
                sharing=("layer", "stack"),
                generator_depth=(0, 1),
                learning_rate=(1e-3, 3e-3),
            ),
        ),
        "quick": replace(
            MQAR_QUICK,
            # trained twice as long as MQAR_QUICK: at 2000 steps no design had started recalling
            train=replace(MQAR_QUICK.train, steps=4000, warmup_steps=400, eval_every=1000),
            domains=choices(
                d_model=(32, 64),
                num_heads=(1, 2, 4),
                metric_rank=(4, 8, 16),
                sharing=("layer", "stack"),
                generator_depth=(0, 1),
                learning_rate=(3e-4, 1e-3),
            ),
            grace_steps=4000,  # = steps: no early stopping (MQAR accuracy jumps late)
            # v5's clean-clone run: DAMCHA (cross) against MHA +31.2 points, 95% CI -98.0 to +160.5 on 3 seeds
            paired_deviation=0.52,
        ),
        "full": replace(
            MQAR_FULL,
            description="Zoology-scale MQAR (32 pairs in 256 tokens) on a GPU cluster, hundreds of trials",
            domains=choices(
                d_model=(64, 128, 256),
                num_heads=(1, 2, 4, 8, 16),
                metric_rank=(8, 16, 32, 64),
                sharing=("layer", "stack"),
                generator_depth=(0, 1, 2),
                learning_rate=(3e-4, 1e-3, 3e-3),
            ),
        ),
    },
)
