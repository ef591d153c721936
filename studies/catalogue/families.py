"""The pieces studies share: the objectives, the attention families compared, the named points."""

from __future__ import annotations

from dataclasses import replace

from studies.catalogue.schema import Family, NamedPoint
from studies.catalogue.tasks import ACCURACY, Objective

FLOPS_PER_EXAMPLE = Objective("flops_per_example", "minimize")
ACCURACY_AND_FLOPS = (ACCURACY, FLOPS_PER_EXAMPLE)
MHA = Family("MHA", {"attention": "mha"}, baseline=True)
DAMCHA_FAMILIES = (
    Family("DAMCHA (paper)", {"attention": "damcha", "metric_mode": "rowsum"}),
    Family("DAMCHA (cross)", {"attention": "damcha", "metric_mode": "cross"}),
)

# The authors' released configuration, at the width and heads the search picks: their rowsum
# metric at full rank, one generator for the whole stack (with post-LayerNorm it reads the
# token and position embeddings, once) with hidden widths 256 then 512, post-LayerNorm blocks;
# trained as they specify: Adam (no weight decay) at learning rate 3e-4.
AUTHORS = NamedPoint(
    "authors' configuration",
    family="DAMCHA (paper)",
    values={
        "metric_rank": "full",
        "sharing": "stack",
        "generator_depth": 2,
        "generator_width": (256, 512),
        "norm": "post",
        "learning_rate": 3e-4,
        "weight_decay": 0.0,
    },
)
# Their text and image models are causal: so is their configuration on those tasks (pooled by mean).
AUTHORS_CAUSAL = replace(AUTHORS, values={**AUTHORS.values, "classifier_causal": True, "pooling": "mean"})
CAUSAL_LRA_TASKS = ("lra_text", "lra_image")
# The cross-head mechanisms the DAMCHA paper compares against (``trainers.attention``).
CROSS_HEAD_FAMILIES = (
    Family("Talking-Heads", {"attention": "tha"}),
    Family("DCMHA", {"attention": "dcmha"}),
    Family("Collaborative MHA", {"attention": "colmha"}),
    Family("Mixed MHA", {"attention": "mma"}),
    Family("MoA", {"attention": "moa"}),
)
