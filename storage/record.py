"""What the store holds: the name of every study and trial attribute this product writes, and what it means.

The engine (``studies.engine``) writes these attributes and the results (``studies.results``) read them,
both by the names below; the trial frame's columns carry the same names. A store is plain Optuna, so
optuna-dashboard and Optuna's CLI show them under these names too. Renaming one breaks every existing
store: add a name, never change one.

The metrics a trial records are copied from its trainer's last report under the trainer's own names
(``trainers.train``, which knows no store): ``REPORTED`` lists them, and a test trains a trial and
checks that its report carries them.
"""

from __future__ import annotations

# --- Trial user attributes: how the trial was planned (``studies.engine.queue.PlannedTrial``) ---
FAMILY = "family"  # the label of the study's family the trial belongs to (``studies.catalogue.schema.Family``)
BASELINE = "baseline"  # True when that family is the study's baseline
POINT = "point"  # the label of the named point the trial trains (``studies.catalogue.schema.NamedPoint``)
POINT_VALUES = "point_values"  # that point's knob values, which are not Optuna parameters
SEED_INDEX = "seed_index"  # which run of its configuration an exhaustive preset's trial is (run i shares seed i)
REPEAT_OF = "repeat_of"  # the number of the search trial whose configuration a seed repeat trains on a fresh seed
# (a seed repeat is a trial of the search's linked study of repeats: ``storage.repeats_study``)
REPEAT_INDEX = "repeat_index"  # which fresh seed (1, 2, ...): repeat k of every configuration shares seed k
RETRY_OF = "retry_of"  # the number of the failed trial whose configuration it runs again
ATTEMPT = "attempt"  # how many times its configuration failed and was retried before (absent: none)

# --- Trial user attributes: how it ran (``studies.engine.ledger``, ``studies.engine.runner``) ---
DRIVER = "driver"  # ``host:pid`` of the driver that asked the trial, written right after the ask
PRESET = "preset"  # the preset's name (the study attribute of this name: "name: description")
CODE_VERSION = "code_version"  # the code's version when the trial ran (``studies.engine.version``)
TASK = "task"  # the task, described (a study attribute of this name too)
MEMORY_BUDGET_BYTES = "memory_budget_bytes"  # the memory a trial was allowed (``--memory``), where set
SEED = "seed"  # the seed it trained with: re-running it needs only this, ``model_config`` and ``train_config``
RAY_TRIAL_ID = "ray_trial_id"  # Ray Tune's id of the trial
MODEL_CONFIG = "model_config"  # the model's settings in full (``trainers.config.ModelConfig``)
TRAIN_CONFIG = "train_config"  # the training's settings in full (``trainers.config.TrainConfig``), the seed among them

# --- Trial user attributes: how it ended (``studies.engine.endings``) ---
ENDING = "ending"  # how it ended, stored at once; Optuna is told when the trial falls into a decision view
ERROR = "error"  # why it failed: the exception's message and the fix, or why it stopped
INTERRUPTED = "interrupted"  # True on a FAIL trial that a Ctrl-C stopped; its retry is queued
INFEASIBLE = "infeasible"  # why its configuration cannot train (Optuna: COMPLETE, its constraint violated)
REACHED_STEP = "reached_step"  # the last step it reported
PRUNED_AT_STEP = "pruned_at_step"  # the step early stopping stopped it at
DIVERGED_AT_STEP = "diverged_at_step"  # the step its loss stopped being finite

# --- Trial user attributes: its costs and metrics, from its trainer's last report ---
PARAMETERS = "parameters"  # the model's parameters
ATTENTION_PARAMETERS = "attention_parameters"  # those of its attention layers
FLOPS = "flops_per_example"  # forward FLOPs per example, on paper (``trainers.costs``)
EXAMPLES_PER_S = "examples_per_s"
TOKENS_PER_S = "tokens_per_s"
FLOPS_PER_S = "flops_per_s"
MODEL_FLOPS_UTILISATION = "model_flops_utilisation"
COMPILE_SECONDS = "compile_seconds"  # time ``torch.compile`` took, where it compiled (kept out of the throughputs)
COMPILED_GRAPHS = "compiled_graphs"  # graphs ``torch.compile`` compiled for the trial (compiled trials only)
RECOMPILES = "recompiles"  # of those, graphs compiled after the trial's warm-up: 0 where its batch shapes held
PEAK_MEMORY_BYTES = "peak_memory_bytes"
WALL_SECONDS = "wall_seconds"  # the training's wall time, evaluations included
DEVICE = "device"  # the device it trained on, by name
TRAIN_LOSS = "train_loss"
VAL_COUNT = "val_count"  # validation examples it was scored on
VAL_LOSS = "val_loss"
VAL_PERPLEXITY = "val_perplexity"
TEST_ACCURACY = "test_accuracy"  # held-out test accuracy, measured once at the last step (the verdict's figure)
TEST_COUNT = "test_count"  # test examples it was scored on
TEST_LOSS = "test_loss"
TEST_BITS_PER_BYTE = "test_bits_per_byte"
TEST_PERPLEXITY = "test_perplexity"
REPORTED = (  # what a trial's last report holds besides its value, recorded as its user attributes
    PARAMETERS,
    ATTENTION_PARAMETERS,
    FLOPS,
    EXAMPLES_PER_S,
    TOKENS_PER_S,
    FLOPS_PER_S,
    MODEL_FLOPS_UTILISATION,
    COMPILE_SECONDS,
    COMPILED_GRAPHS,
    RECOMPILES,
    PEAK_MEMORY_BYTES,
    WALL_SECONDS,
    DEVICE,
    TRAIN_LOSS,
    VAL_COUNT,
    VAL_LOSS,
    VAL_PERPLEXITY,
    TEST_ACCURACY,
    TEST_COUNT,
    TEST_LOSS,
    TEST_BITS_PER_BYTE,
    TEST_PERPLEXITY,
)

# --- Objective metrics: the names of a trial's values (the ``objectives`` study attribute maps them) ---
ACCURACY = "val_accuracy"  # validation accuracy, the searches' first objective on classification tasks

# --- Study user attributes (``studies.engine.optuna_study``, ``studies.engine.runner``) ---
QUESTION = "question"  # what the study asks, from its definition
COMMAND = "command"  # the command line of the latest run
DEFAULT_PRESET = "default_preset"  # True when a run without --preset made it (short names read it)
BUDGET = "budget"  # the trials, families, seed repeats, steps and search the run was given
SEARCH_SPACE = "search_space"  # each searched knob's domain, described
RELIABILITY = "reliability"  # how often the preset's answer reaches its truth's, in a sentence
OBJECTIVES = "objectives"  # each objective's metric and direction, in Optuna's order of values
VERDICT = "verdict"  # the verdict's sentence, stored after a run
VERDICT_PROVISIONAL = "verdict_provisional"  # why the stored verdict may still change (trials running elsewhere); "" if final
VERDICT_REPEATS = "verdict_repeats"  # how many complete seed repeats the stored verdict read (a later count: it is stale)
VERDICT_TABLE = "verdict_table"  # the verdict, a row per comparison as text (``studies.results.verdict_table``)
REPEATS_STUDY = "repeats_study"  # on a search's study: the study in the same store that holds its seed repeats
SEARCH_STUDY = "search_study"  # on a study of seed repeats: the search's study, whose trials its ``repeat_of`` numbers
