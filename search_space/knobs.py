"""Every knob a study may open, with its full domain, its default and its conditions.

Model knobs are ``trainers.config.ModelConfig`` fields; training knobs are
``trainers.train.TrainConfig`` fields. Defaults are the configs' defaults.
"""

from __future__ import annotations

from collections.abc import Mapping

from search_space.space import Choice, Knob, Range, Rule, Value
from trainers.attention.damcha import DEFAULT_METRIC_CHUNK, METRIC_FORMS, METRIC_MODES
from trainers.config import parse_sharing

DAMCHA_ONLY = {"attention": ("damcha",)}

KNOBS: dict[str, Knob] = {
    knob.name: knob
    for knob in (
        Knob("attention", Choice(("mha", "damcha")), "mha", help="attention variant"),
        Knob("num_heads", Choice((1, 2, 4, 8, 16, 32)), 4, help="attention heads; must divide d_model"),
        Knob("metric_rank", Choice((1, 2, 4, 8, 16, 32, 64, "full")), 16, DAMCHA_ONLY, "rank r of the generated metric (U V^T)"),
        Knob("metric_form", Choice(METRIC_FORMS), "bilinear", DAMCHA_ONLY, "how the metric enters the scores"),
        Knob("metric_mode", Choice(METRIC_MODES), "cross", DAMCHA_ONLY, "cross-head metric or the authors' rowsum mode"),
        Knob("generator_depth", Choice((0, 1, 2, 3)), 1, DAMCHA_ONLY, "hidden layers of the metric generator (0 = static metric)"),
        Knob("generator_width", Choice((16, 32, 64, 128, 256)), 64, DAMCHA_ONLY, "hidden width of the metric generator"),
        Knob("metric_chunk", Choice((1, 16, 64, 256)), DEFAULT_METRIC_CHUNK, DAMCHA_ONLY,
             "causal models: positions per generated metric (1 = one per position)"),
        Knob("sharing", Choice(("layer", "group:2", "group:3", "group:4", "stack")), "layer", DAMCHA_ONLY,
             "consecutive layers sharing one generator"),
        Knob("d_model", Choice((32, 64, 128, 256, 512)), 128, help="model width D"),
        Knob("num_layers", Range(1, 12, integer=True), 2, help="transformer blocks"),
        Knob("mlp_width", Choice((64, 128, 256, 512, 1024, 2048)), 256, help="hidden width of each block's MLP"),
        Knob("learning_rate", Range(1e-5, 1e-1, log=True), 1e-3, help="peak AdamW learning rate"),
        Knob("weight_decay", Range(0.0, 0.5), 0.01, help="AdamW weight decay"),
    )
}


def _sharing_fits(values: Mapping[str, Value]) -> bool:
    try:
        parse_sharing(str(values["sharing"]), int(values["num_layers"]))
    except ValueError:
        return False
    return True


RULES: tuple[Rule, ...] = (
    Rule(("num_heads", "d_model"), lambda v: int(v["d_model"]) % int(v["num_heads"]) == 0,
         "num_heads must divide d_model: choose fewer heads or a wider model"),
    Rule(("metric_rank", "d_model"), lambda v: v["metric_rank"] == "full" or int(v["metric_rank"]) <= int(v["d_model"]),
         "metric_rank must be at most d_model (or 'full')"),
    Rule(("metric_mode", "metric_form"), lambda v: v["metric_mode"] != "rowsum" or v["metric_form"] == "bilinear",
         "the rowsum mode has no Mahalanobis form: use metric_form='bilinear'"),
    Rule(("sharing", "num_layers"), _sharing_fits, "group:K needs K <= num_layers"),
)

MODEL_KNOBS = ("attention", "num_heads", "metric_rank", "metric_form", "metric_mode", "generator_depth",
               "generator_width", "metric_chunk", "sharing", "d_model", "num_layers", "mlp_width")
TRAINING_KNOBS = ("learning_rate", "weight_decay")
