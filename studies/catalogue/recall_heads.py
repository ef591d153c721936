"""recall_heads: does cross-head mixing let fewer or narrower heads recall more pairs per FLOP than MHA.

Version history: docs/changelog.md.
"""

from __future__ import annotations

from dataclasses import replace

from search_space.knobs import KNOBS, RULES
from search_space.space import SearchSpace
from studies.catalogue.cross_head import CROSS_HEAD
from studies.catalogue.families import ACCURACY_AND_FLOPS, AUTHORS, DAMCHA_FAMILIES, MHA
from studies.catalogue.schema import Study, choices

RECALL_HEADS = Study(
    name="recall_heads",
    summary="MQAR: does cross-head mixing let fewer or narrower heads recall more pairs per FLOP than MHA",
    doc="""Does DAMCHA's cross-head mixing let fewer or narrower heads recall more key-value pairs
than multi-head attention at the same forward FLOPs, on multi-query associative recall?
Both are searched over head count and width, DAMCHA also over metric rank, sharing and
generator depth.

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
    presets={  # each trains as cross_head's preset of its name does (data, model, budget per trial)
        "smoke": replace(
            CROSS_HEAD.preset("smoke"),
            description="a whole study, short trials of small models (what the tests run)",
            domains=choices(
                d_model=(32,),
                num_heads=(1, 2),
                metric_rank=(4,),
                sharing=("layer", "stack"),
                generator_depth=(0, 1),
                learning_rate=(1e-3, 3e-3),
            ),
            trials=6,
        ),
        "quick": replace(
            CROSS_HEAD.preset("quick"),
            description="MQAR (4 pairs in 32 tokens) on a 2-core laptop CPU, seed repeats included",
            # trained twice as long as cross_head's: at 2000 steps no design had started recalling
            train=replace(CROSS_HEAD.preset("quick").train, steps=4000, warmup_steps=400, eval_every=1000),
            domains=choices(
                d_model=(32, 64),
                num_heads=(1, 2, 4),
                metric_rank=(4, 8, 16),
                sharing=("layer", "stack"),
                generator_depth=(0, 1),
                learning_rate=(3e-4, 1e-3),
            ),
            trials=12,
            grace_steps=4000,  # = steps: no early stopping (MQAR accuracy jumps late)
        ),
        "full": replace(
            CROSS_HEAD.preset("full"),
            description="Zoology-scale MQAR (32 pairs in 256 tokens) on a GPU cluster, hundreds of trials",
            domains=choices(
                d_model=(64, 128, 256),
                num_heads=(1, 2, 4, 8, 16),
                metric_rank=(8, 16, 32, 64),
                sharing=("layer", "stack"),
                generator_depth=(0, 1, 2),
                learning_rate=(3e-4, 1e-3, 3e-3),
            ),
            trials=240,
        ),
    },
)
