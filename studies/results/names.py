"""The names results are read by: the trial frame's columns and keys (the store's attribute names are ``storage.record``'s)."""

from __future__ import annotations

from optuna.trial import TrialState

from storage import record

SCORE = "score"  # frame column: the study's first objective, signed so that larger is better
CURVE = "curve"  # frame column: the values a trial reported, by step (its learning curve; {} for none)
STARTED_STATES = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
INFEASIBLE = "INFEASIBLE"  # the outcome of such a trial (Optuna: COMPLETE, its constraint violated)


def outcome_name(state_name: str, infeasible: bool) -> str:
    """What a trial came to, as the summary and the progress line count it: its state's name, or ``INFEASIBLE``
    for a configuration that cannot train (which Optuna keeps COMPLETE, its constraint violated)."""
    return INFEASIBLE if infeasible else state_name


ATTRIBUTE_COLUMNS = (
    record.FAMILY,
    record.BASELINE,
    record.SEED,
    record.PARAMETERS,
    record.ATTENTION_PARAMETERS,
    record.FLOPS,
    record.EXAMPLES_PER_S,
    record.TOKENS_PER_S,
    record.PEAK_MEMORY_BYTES,
    record.WALL_SECONDS,
    record.DEVICE,
    record.REACHED_STEP,
    record.VAL_COUNT,
    record.VAL_LOSS,
    record.VAL_PERPLEXITY,
    record.TEST_ACCURACY,
    record.TEST_COUNT,
    record.TEST_LOSS,
    record.TEST_BITS_PER_BYTE,
    record.PRUNED_AT_STEP,
    record.ERROR,
    record.INFEASIBLE,
    record.DIVERGED_AT_STEP,
    record.RAY_TRIAL_ID,
    record.REPEAT_OF,
    record.REPEAT_INDEX,
    record.POINT,
    record.SEED_INDEX,
)


# A FAIL trial without an error message: Optuna's stale-trial check failed it when its driver's
# heartbeat stopped (a finished trial takes no more attributes; every other failure records one).
LOST_DRIVER_ERROR = "its driver stopped sending heartbeats (killed or lost); another driver failed it and queued a retry"
KNOBS_ATTRIBUTE = "knobs"  # ``frame.attrs`` key: the knob columns, in the study's search order
QUALITY_ATTRIBUTE = "quality"  # ``frame.attrs`` key: the ``Quality`` its values measure
FAMILIES_ATTRIBUTE = "families"  # ``frame.attrs`` key: the study's family labels, the baseline's first
FAMILY_KNOBS_ATTRIBUTE = "family_knobs"  # ``frame.attrs`` key: the knobs the families set (attention, metric_mode)
TASK_ATTRIBUTE = "task"  # ``frame.attrs`` key: the task's name (the study's ``task`` attribute), where recorded
