"""The engine: everything that runs a study, one job per module.

options      a run resolved in one step from a study, a preset and the options, checked before anything is written
study_space  what a preset searches: its space, an exhaustive preset's table (from the catalogue's data)
errors       the error every option check raises (light: checks that run before torch and Ray raise it)
ray_address  the Ray a run joins or starts, settled before Ray is imported: the address checked, its variables
optuna_study the run's Optuna study, created or resumed, with its settings recorded
queue        the store as the queue of planned trials (next family, retries, repeats)
ledger       asks configurations and records every report and ending in the Optuna study, from named parts
held_trials  the trials a driver holds: asked, not yet told to Optuna; telling them, giving one up
recovery     every rule that keeps the store right: heartbeats, dead drivers' trials, Ctrl-C's trials retried
next_trial   what the next searched trial is: a table's next entry, the family whose turn it is, its named point
views        a family's view of the store: the searched trials a decision about a trial reads
stopping     early stopping's rule: the rungs, whether a family's trials there stop a trial, a run's judgements
seeds        the seed layout: a run's trials, its seed repeats and a table's runs never share a seed
trial_config a trial's model configuration from its knobs and the fixed values that apply, and its FLOPs;
             ``TrialSpec``, the typed trial that crosses into a Ray worker
sampler      the Optuna sampler, and infeasible configurations told to it
family_sampler  each family its own sampler; no configuration twice; the others within the baseline's cost band
optuna_internals  what the samplers need of Optuna's internals, in one place: a study's trials shown through
             a function (``StudyView``), an enqueued trial's values (``queued_values``)
repeats      each family's selected configurations queued again on fresh seeds, in one look or two
cluster      Ray: join a cluster or start a local one; what one trial asks of it
signals      SIGTERM and SIGHUP stop a run as Ctrl-C does
scheduler    Ray Tune's hook that stops a trial where the ledger's rule says (``Ledger.stops``), never a seed repeat
tune_bridge  the Ray Tune run: searcher, callbacks and the Tuner
tune_internals  what a run needs of Ray Tune's internals, in one place: a failed trial's local error file
run_fault    a store or disk failure met inside Ray Tune: kept, the run stopped at its next step, raised after
trainable    what a worker runs for one trial
trial_errors a trial's exception, classified by type: retry, infeasible or fail
progress     a line per finished trial, and the live progress line with the run's ETA
plan         ``--plan``: what a run would do and cost, writing nothing
wall_time    the one model of a run's wall time, which the plan and the live ETA share
version      the code version every trial records
runner       ``run_study``: the above in order, then the run's results read once and its verdict stored
suite_runner ``run_suite``: a suite's studies in turn
"""
