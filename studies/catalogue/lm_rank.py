"""lm_rank: which DAMCHA metric rank, generator depth, sharing and heads beat MHA per FLOP at byte-level language modelling.

Version history: docs/changelog.md.
"""

from __future__ import annotations

from dataclasses import replace

from studies.catalogue.families import AUTHORS, DAMCHA_FAMILIES, FLOPS_PER_EXAMPLE, MHA
from studies.catalogue.lra_sharing import LRA_SHARING
from studies.catalogue.recall_heads import MQAR_FULL
from studies.catalogue.schema import Preset, Study, choices
from studies.catalogue.tasks import BITS_PER_BYTE, ByteLanguageTask
from trainers.data.corpus import CorpusSpec
from trainers.train import TrainConfig

LM_RANK = Study(
    name="lm_rank",
    summary="byte-level language modelling: which DAMCHA metric rank, generator depth, sharing and heads beat MHA per FLOP",
    doc="""Which metric rank, generator depth, sharing granularity and head count give causal DAMCHA
the lowest validation bits per byte for its forward FLOPs, against multi-head attention at
every head count and width searched, on byte-level language modelling? The corpus is the
Python standard library's source by default (offline); --data-dir names a directory of
text files or hf:NAME[:CONFIG], a data set that `datasets` resolves.

    python -m studies.run lm_rank --preset quick
""",
    space=LRA_SHARING.space,  # the same knobs: MHA's width and heads, DAMCHA's as well
    objectives=(BITS_PER_BYTE, FLOPS_PER_EXAMPLE),
    families=(MHA, *DAMCHA_FAMILIES),
    points=(AUTHORS,),
    version=3,
    presets={
        preset.name: preset
        for preset in (
            Preset(
                name="smoke",
                description="a whole study, short trials of small models (what the tests run)",
                task=ByteLanguageTask(CorpusSpec(seq_len=32, train_examples=256, val_examples=32, test_examples=32)),
                train=TrainConfig(steps=40, batch_size=16, warmup_steps=4, eval_every=20, learning_rate=1e-3),
                fixed={"num_layers": 2, "mlp_width": 64, "metric_chunk": 8},
                domains=choices(
                    d_model=(32,),
                    num_heads=(2, 4),
                    sharing=("layer", "stack"),
                    metric_rank=(4,),
                    generator_depth=(0, 1),
                    learning_rate=(1e-3, 3e-3),
                ),
                trials=6,
                grace_steps=40,
                repeat_seeds=2,
            ),
            Preset(
                name="quick",
                description="128-byte windows of the standard library's source on a 2-core laptop CPU, seed repeats included",
                task=ByteLanguageTask(CorpusSpec(seq_len=128, train_examples=8000, val_examples=250, test_examples=250)),
                train=TrainConfig(steps=1000, batch_size=32, warmup_steps=100, eval_every=250, learning_rate=1e-3),
                fixed={"num_layers": 2, "mlp_width": 128, "metric_chunk": 16},
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
            ),
            Preset(
                name="full",
                description="1024-byte windows (25.6 MB of text) on a GPU cluster, hundreds of trials",
                task=ByteLanguageTask(CorpusSpec(seq_len=1024, train_examples=25_000, val_examples=2000, test_examples=2000)),
                train=replace(MQAR_FULL.train, batch_size=32),  # 20k steps, bf16, compiled
                fixed={"num_layers": 6, "mlp_width": 1024, "metric_chunk": 64},
                domains=choices(
                    d_model=(256, 512),
                    num_heads=(4, 8, 16),
                    sharing=("layer", "group:2", "stack"),
                    metric_rank=(8, 16, 32, 64),
                    generator_depth=(0, 1, 2),
                    learning_rate=(3e-4, 1e-3),
                ),
                trials=240,
                cpus_per_trial=4,
                gpus_per_trial=1,
                grace_steps=5000,
                repeat_seeds=5,
                parallel_trials=8,
            ),
        )
    },
)
