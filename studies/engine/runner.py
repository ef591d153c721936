"""Run a study: check its options, open its Optuna study, run its trials and then its seed repeats on Ray Tune, then
read its results once and store its verdict. Showing them (the report, the summary) is the command line's
(``studies.show``)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

import optuna
import ray
from optuna.trial import TrialState

from storage import (
    StudyLock,
    parse_storage_url,
    record,
    single_writer,
)
from storage.repeats_study import complete_repeats, linked_repeats, trials_with_repeats
from studies.catalogue.schema import Study
from studies.engine.cluster import start_ray
from studies.engine.ledger import Asking, Ledger, LedgerStore, Outlook, TrialSetup
from studies.engine.options import RunOptions, check_options
from studies.engine.optuna_study import open_study
from studies.engine.queue import queued
from studies.engine.recovery import trials_to_run
from studies.engine.repeats import later_looks_repeats, most_repeats, plan_repeats
from studies.engine.tune_bridge import run_on_tune
from studies.engine.version import code_version
from studies.results import StudyResults
from studies.results.frame import outcome
from studies.results.verdict import provisional
from studies.results.verdict_table import verdict_frame

_WAITING = (
    "waiting for another driver of study {}: it holds the study's lock while it counts and asks for trials "
    "(a driver that is paused or hung holds it until it goes on or ends)"
)

_QUEUED_EARLIER = "{} seed repeats queued earlier (a stopped run's, or another driver's) run too"


@dataclass(frozen=True)
class FinishedRun:
    """A run that ended: where it left its results, and those results, read once.

    Attributes:
        study: The Optuna study, its verdict stored.
        storage: The store's URL.
        results: Its results, read after its last trial.
        counts: Its trials (seed repeats included) by outcome.
    """

    study: optuna.Study
    storage: str
    results: StudyResults
    counts: dict[str, int]

    @property
    def study_name(self) -> str:
        """The Optuna study's name."""
        return self.study.study_name


def run_study(study: Study, options: RunOptions, out: TextIO | None = None) -> FinishedRun:
    """Run (or resume) a study and store its verdict.

    Args:
        study: The study definition.
        options: The run's options.
        out: Where its messages go (default: ``sys.stdout`` at call time).

    Returns:
        The study, its store, its results and its trial counts.

    Raises:
        StudyOptionError, SearchSpaceError, StorageURLError, UnknownNameError: bad input,
            before anything is written (``check_options``).
        DataFileError: a missing or malformed release file, before the store is touched.
        StoreBusyError: another driver is writing to the same SQLite store.
    """
    out = out or sys.stdout
    run = check_options(study, options)
    preset = run.preset
    cache_dir = run.cache_dir
    if preset.task.reads_files:  # read before the store is touched: a bad file leaves it as it was
        preset.task.load(cache_dir)
    with single_writer(run.url):
        optuna_study, storage = open_study(study, run, options, out)
        exclusive = parse_storage_url(run.url).get_backend_name() == "sqlite"  # one driver: single_writer's lock
        lock = StudyLock(
            run.url, optuna_study.study_name, on_wait=lambda: print(_WAITING.format(optuna_study.study_name), file=out)
        )
        with lock.held():  # one driver at a time recovers and counts
            to_run = trials_to_run(optuna_study, storage, run.trials, exclusive=exclusive)
        ahead = most_repeats(study, run.repeat_seeds)
        then = f", then up to {ahead} seed repeats" if ahead else ""
        print(f"study {optuna_study.study_name}: {to_run} search trials to run (--trials {run.trials}){then}", file=out)
        for sentence in run.left_out:
            print(f"note: {sentence}", file=out)

        if not preset.task.reads_files:  # built once here, after a bad storage URL has failed fast; workers memory-map it
            preset.task.load(cache_dir)
        attributes = {record.PRESET: preset.name, record.CODE_VERSION: code_version(), record.TASK: preset.task.describe()}
        if run.resources.memory is not None:
            attributes[record.MEMORY_BUDGET_BYTES] = run.resources.memory

        def tune_trials(asked: optuna.Study, budget: int, then: int = 0) -> None:
            """Run ``asked``'s queue (the search's study, or its study of seed repeats), then searched trials up to
            ``budget``, on Ray Tune (``then``: seed repeats, at most, expected after)."""
            ledger = Ledger(
                LedgerStore(asked, storage, search=optuna_study, ask_lock=lock.held, exclusive=exclusive),
                Asking(run.definition, preset, run.space, budget, fix=run.fix_unsearched, seed=options.seed),
                TrialSetup(str(cache_dir), run_attributes=attributes, memory_bytes=run.resources.memory),
                Outlook(then, repeat_seeds=run.repeat_seeds if then else 0),
            )
            started_at = time.monotonic()
            run_on_tune(ledger, optuna_study.study_name, run.resources)
            if ledger.waited_seconds:  # what deciding on views free of finishing order cost (``Ledger``): a slot stood idle
                phase = time.monotonic() - started_at
                print(
                    f"a trial slot waited {ledger.waited_seconds:.0f} s for earlier trials to end ({phase:.0f} s phase)", file=out
                )

        started = start_ray(options.address) if to_run or run.repeat_seeds else False
        try:
            if to_run:
                tune_trials(optuna_study, run.trials, then=ahead)
            looks = preset.repeat_looks(run.repeat_seeds)
            for look, seeds in enumerate(looks):
                if searching := len(optuna_study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))):
                    # Another driver's search trial may change what the verdict compares: the driver that ends the
                    # search last plans the repeats.
                    print(_SEARCH_ELSEWHERE.format(searching), file=out)
                    break
                with lock.held():  # drivers sharing the store queue each repeat once
                    repeats = plan_repeats(optuna_study, seeds, open_only=look > 0, progress=_queueing(out))
                if repeats:
                    print(_repeating(repeats, seeds, look, len(looks)), file=out)
                repeats_study = linked_repeats(optuna_study)
                waiting = 0 if repeats_study is None else len(queued(repeats_study))
                if waiting > repeats:
                    print(_QUEUED_EARLIER.format(waiting - repeats), file=out)
                if repeats_study is not None and waiting:  # the ETA counts a second look's repeats at most
                    tune_trials(repeats_study, 0, then=later_looks_repeats(optuna_study, looks, look))
        finally:  # an interrupted run ends here too: its report (a finished study's, maybe) is left as it was
            if started:
                ray.shutdown()

        results = StudyResults.read(optuna_study)  # once: the stored verdict, the report and the summary read it
        optuna_study.set_user_attr(record.VERDICT, results.verdict.sentence)
        optuna_study.set_user_attr(record.VERDICT_TABLE, verdict_frame(results).to_dict("records"))
        optuna_study.set_user_attr(record.VERDICT_PROVISIONAL, provisional(results.frame))
        trials = trials_with_repeats(optuna_study)  # one read: the count the verdict rests on, the run's counts
        optuna_study.set_user_attr(record.VERDICT_REPEATS, complete_repeats(trials))
        counts = Counter(outcome(trial) for trial in trials)
        return FinishedRun(optuna_study, storage=run.url, results=results, counts=counts)


_SEARCH_ELSEWHERE = (
    "{} search trials still run under other drivers: the seed repeats are left to the driver that ends the search last"
)


def _queueing(out: TextIO) -> Callable[[int, int], None]:
    """What a run says while it queues many seed repeats (each is a write to the store)."""

    def said(queued_now: int, due: int) -> None:
        print(f"queueing seed repeats: {queued_now} of {due}", file=out, flush=True)

    return said


def _repeating(repeats: int, seeds: int, look: int, looks: int) -> str:
    """What a run says as it queues a look's seed repeats."""
    if look == 0:
        then = " (then more where a comparison is still open)" if looks > 1 else ""
        what = "the configurations the verdict compares, at matched cost"
        return f"repeating {repeats} trials: {what}, {seeds} fresh seeds each{then}"
    return f"repeating {repeats} more trials: the comparisons the first look left open, up to {seeds} fresh seeds each"
