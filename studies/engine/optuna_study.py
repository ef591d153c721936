"""The run's Optuna study: created or resumed under its stable name, with the study's question and settings recorded."""

from __future__ import annotations

import datetime
import warnings
from typing import TextIO

import optuna

from storage import (
    masked_url,
    open_storage,
    record,
)
from storage.repeats_study import check_repeats_place, linked_repeats
from studies.catalogue.reliability import NOT_MEASURED, PLUMBING_CHECK, PLUMBING_PRESET
from studies.catalogue.schema import Study
from studies.catalogue.store_names import fresh_name
from studies.engine.options import CheckedRun, RunOptions
from studies.engine.recovery import heartbeat_options
from studies.engine.sampler import study_sampler
from studies.engine.trial_config import configuration_flops


def _existing(storage: optuna.storages.BaseStorage, name: str) -> optuna.Study | None:
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        return None


def open_study(
    study: Study, run: CheckedRun, options: RunOptions, out: TextIO
) -> tuple[optuna.Study, optuna.storages.BaseStorage]:
    """Create or resume the Optuna study (a new one under ``--fresh``) and record its settings.

    Returns:
        The study, and the storage that holds it.

    Raises:
        storage.repeats_study.RepeatsStudyError: the store holds a study in the place of its seed repeats that is not them.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the progress line and summary say what matters
    storage = open_storage(run.url, **heartbeat_options())
    name = run.study_name
    if options.fresh and (old := _existing(storage, name)) is not None:
        new = fresh_name(name, datetime.datetime.now())
        print(
            f"--fresh: study {name!r} ({len(old.trials)} trials) stays as it is in {masked_url(run.url)}; starting {new!r}",
            file=out,
        )
        name = new
    check_repeats_place(storage, name)  # before anything is stored: a run adopts no study it did not create
    optuna_study = optuna.create_study(
        study_name=name,
        storage=storage,
        directions=[objective.direction for objective in study.objectives],
        sampler=study_sampler(
            run.preset.search,
            study,
            run.space,
            run.trials,
            options.seed,
            configuration_flops(run.preset, run.space, run.fix_unsearched),
        ),
        load_if_exists=True,
    )
    linked_repeats(optuna_study)  # a resumed search's repeats are verified before anything is stored
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna_study.set_metric_names([objective.metric for objective in study.objectives])
    _record_settings(optuna_study, study, run, options)
    return optuna_study, storage


def reliability_line(run: CheckedRun) -> str:
    """How often a run like this one reaches its truth table's conclusion (``Preset.reliability``), in a
    sentence; a run whose settings the replays did not cover says it is not measured, and a smoke run that it
    is a plumbing check."""
    measured = run.preset.reliability
    if run.preset.name == PLUMBING_PRESET:
        return PLUMBING_CHECK
    if measured is None:
        return NOT_MEASURED
    if run.fix or run.train_overrides:
        return "How sure: not measured for this run: --fix, --precision or --compile make another study than the replays ran."
    line = measured.sentence(run.trials)
    if run.repeat_seeds != run.preset.repeat_seeds:
        line += f" It repeats {run.repeat_seeds} fresh seeds where the replays repeated {run.preset.repeat_seeds}."
    return line


def _record_settings(optuna_study: optuna.Study, study: Study, run: CheckedRun, options: RunOptions) -> None:
    """The study's question and settings, and the command of the run (the latest), for reports and optuna-dashboard."""
    preset = run.preset
    # The doc's example command is the catalogue's; the report shows the run's own (``command``).
    question = "\n".join(line for line in study.doc.strip().splitlines() if not line.strip().startswith("python -m "))
    optuna_study.set_user_attr(record.QUESTION, question.strip())
    optuna_study.set_user_attr(record.COMMAND, options.command or options.command_line(study.name))
    optuna_study.set_user_attr(record.PRESET, f"{preset.name}: {preset.description}")
    optuna_study.set_user_attr(record.DEFAULT_PRESET, preset.name == study.default_preset)  # short names read it
    optuna_study.set_user_attr(record.TASK, preset.task.describe())
    families = {family.label: dict(family.values) for family in study.families}
    searched, stops = not preset.exhaustive_seeds, (preset.grace_steps, preset.train.steps)
    optuna_study.set_user_attr(
        record.BUDGET,
        {
            "trials": run.trials,
            "families": families,
            "trials_per_family": run.trials_per_family(len(families)),  # words, as the plan says it: "9 or 10"
            "fresh_seeds_per_repeated_configuration": run.repeat_seeds,
            "fresh_seeds_after_each_look": list(preset.repeat_looks(run.repeat_seeds)),
            "steps_per_trial": preset.train.steps,
            "early_stopping_grace_steps": preset.grace_steps if searched and preset.search.stops_early(*stops) else None,
            "search": preset.search.describe(*stops) if searched else None,
            "exhaustive_seeds": preset.exhaustive_seeds or None,
            "deciding_seeds": (
                {
                    "seeds": preset.deciding.seeds,
                    "where": [dict(where) for where in preset.deciding.where],
                    "matchable": preset.deciding.matchable,
                }
                if preset.exhaustive_seeds and preset.deciding
                else None
            ),
        },
    )
    optuna_study.set_user_attr(
        record.SEARCH_SPACE, {name: run.space.knobs[name].domain.describe() for name in run.space.searched}
    )
    optuna_study.set_user_attr(record.RELIABILITY, reliability_line(run))
    optuna_study.set_user_attr(record.OBJECTIVES, {objective.metric: objective.direction for objective in study.objectives})
