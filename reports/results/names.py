"""The names results are read by: trial attributes this product writes, the trial frame's columns and keys."""

from __future__ import annotations

from optuna.trial import TrialState

ACCURACY, TEST_ACCURACY, FLOPS = "val_accuracy", "test_accuracy", "flops_per_example"
SCORE = "score"  # frame column: the study's first objective, signed so that larger is better
INFEASIBLE_ATTRIBUTE = "infeasible"  # user attribute: why the trial's configuration cannot train
POINT_ATTRIBUTE = "point"  # user attribute: the named point a trial trains (``studies.catalogue.schema.NamedPoint``)
POINT_VALUES_ATTRIBUTE = "point_values"  # user attribute: that point's knob values, which are no Optuna params
SEED_INDEX_ATTRIBUTE = "seed_index"  # user attribute: which run of its configuration an exhaustive preset's trial is
STARTED_STATES = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
INFEASIBLE = "INFEASIBLE"  # the outcome of such a trial (Optuna: COMPLETE, its constraint violated)
ATTRIBUTE_COLUMNS = (
    "family",
    "baseline",
    "seed",
    "parameters",
    "attention_parameters",
    FLOPS,
    "examples_per_s",
    "tokens_per_s",
    "peak_memory_bytes",
    "wall_seconds",
    "device",
    "reached_step",
    "val_count",
    "val_loss",
    "val_perplexity",
    TEST_ACCURACY,
    "test_count",
    "test_loss",
    "test_bits_per_byte",
    "pruned_at_step",
    "error",
    INFEASIBLE_ATTRIBUTE,
    "diverged_at_step",
    "ray_trial_id",
    "repeat_of",
    "repeat_index",
    POINT_ATTRIBUTE,
    SEED_INDEX_ATTRIBUTE,
)


# A FAIL trial without an error message: Optuna's stale-trial check failed it when its driver's
# heartbeat stopped (a finished trial takes no more attributes; every other failure records one).
LOST_DRIVER_ERROR = "its driver stopped sending heartbeats (killed or lost); another driver failed it and queued a retry"
KNOBS_ATTRIBUTE = "knobs"  # ``frame.attrs`` key: the knob columns, in the study's search order
QUALITY_ATTRIBUTE = "quality"  # ``frame.attrs`` key: the ``Quality`` its values measure
FAMILIES_ATTRIBUTE = "families"  # ``frame.attrs`` key: the study's family labels, the baseline's first
FAMILY_KNOBS_ATTRIBUTE = "family_knobs"  # ``frame.attrs`` key: the knobs the families set (attention, metric_mode)
RELIABILITY_ATTRIBUTE = "reliability"  # study user attribute: how often the preset's answer reaches its truth's, in a sentence
TASK_ATTRIBUTE = "task"  # ``frame.attrs`` key: the task's name (the study's ``task`` attribute), where recorded
