"""cross_head: DAMCHA against MHA and the five cross-head mechanisms the paper compares against, on MQAR.

Version history: docs/changelog.md.
"""

from __future__ import annotations

from search_space.knobs import KNOBS, RULES
from search_space.space import SearchSpace
from studies.catalogue.families import ACCURACY_AND_FLOPS, AUTHORS, CROSS_HEAD_FAMILIES, DAMCHA_FAMILIES, MHA
from studies.catalogue.schema import Preset, Study, choices
from studies.catalogue.tasks import RecallTask
from trainers.data.recall import RecallSpec
from trainers.train import TrainConfig

CROSS_HEAD = Study(
    name="cross_head",
    summary="MQAR: DAMCHA against MHA and five other cross-head mechanisms, per FLOP",
    doc="""Does DAMCHA recall more key-value pairs for its forward FLOPs than multi-head attention
and the cross-head mechanisms the paper compares against (Talking-Heads, DCMHA,
collaborative, mixed and mixture-of-heads attention), each searched over the same widths
and head counts with an equal share of the budget, on multi-query associative recall?

    python -m studies.run cross_head --preset quick
""",
    space=SearchSpace(
        knobs=KNOBS,
        searched=(
            "attention",
            "metric_mode",
            "d_model",
            "num_heads",
            "metric_rank",
            "generator_depth",
            "router_rank",
            "local_window",
            "expert_factor",
            "learning_rate",
        ),
        rules=RULES,
    ),
    objectives=ACCURACY_AND_FLOPS,
    families=(MHA, *DAMCHA_FAMILIES, *CROSS_HEAD_FAMILIES),
    points=(AUTHORS,),
    version=4,
    presets={
        preset.name: preset
        for preset in (
            Preset(
                name="smoke",
                description="a whole study of the eight families, short trials of small models (what the tests run)",
                task=RecallTask(RecallSpec(seed=0, vocab_size=16, seq_len=16, num_pairs=2, num_examples=256), val_examples=64),
                train=TrainConfig(steps=40, batch_size=16, warmup_steps=4, eval_every=20, learning_rate=1e-3),
                fixed={"num_layers": 2, "mlp_width": 64, "metric_chunk": 4},
                domains=choices(
                    d_model=(32,),
                    num_heads=(2, 4),
                    metric_rank=(4,),
                    generator_depth=(0, 1),
                    router_rank=(2,),
                    local_window=(4,),
                    expert_factor=(2,),
                    learning_rate=(1e-3, 3e-3),
                ),
                trials=8,
                grace_steps=40,  # = steps: no early stopping (one trial per family; MQAR accuracy jumps late)
                repeat_seeds=2,
            ),
            Preset(
                name="quick",
                description="MQAR (4 pairs in 32 tokens) on a 2-core laptop CPU, seed repeats included",
                task=RecallTask(
                    RecallSpec(seed=0, vocab_size=64, seq_len=32, num_pairs=4, num_examples=16_000), val_examples=500
                ),
                train=TrainConfig(steps=2000, batch_size=64, warmup_steps=200, eval_every=500, learning_rate=1e-3),
                fixed={"num_layers": 2, "mlp_width": 64, "metric_chunk": 8},
                domains=choices(
                    d_model=(32,),
                    num_heads=(2, 4),
                    metric_rank=(4, 8),
                    generator_depth=(0, 1),
                    router_rank=(2, 4),
                    local_window=(4, 8),
                    expert_factor=(2,),
                    learning_rate=(3e-4, 1e-3),
                ),
                trials=16,
                grace_steps=2000,  # = steps: no early stopping (two trials per family; MQAR accuracy jumps late)
            ),
            Preset(
                name="full",
                description="Zoology-scale MQAR (32 pairs in 256 tokens, vocabulary 8192) on a GPU cluster, hundreds of trials",
                task=RecallTask(
                    RecallSpec(seed=0, vocab_size=8192, seq_len=256, num_pairs=32, num_examples=100_000), val_examples=3000
                ),
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
                domains=choices(
                    d_model=(64, 128, 256),
                    num_heads=(2, 4, 8, 16),
                    metric_rank=(8, 16, 32, 64),
                    generator_depth=(0, 1, 2),
                    router_rank=(4, 8, 16),
                    local_window=(8, 16, 32, 64),
                    expert_factor=(1, 2, 4),
                    learning_rate=(3e-4, 1e-3, 3e-3),
                ),
                trials=320,
                cpus_per_trial=4,
                gpus_per_trial=1,
                grace_steps=10_000,
                repeat_seeds=5,
                parallel_trials=8,
            ),
        )
    },
)
