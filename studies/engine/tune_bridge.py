"""Ray Tune's side of a run: the Tuner, which asks the ledger for configurations and hands it every result and ending.

Ray's own ``OptunaSearch`` drops what this product must keep (intermediate values in
multi-objective studies, the last report, pruned states, user attributes), so the
bridge is ours: ``LedgerSearcher`` lets Ray Tune ask the ``Ledger`` for configurations
and ``LedgerCallback`` hands it every result and ending, with the exception Tune kept.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune import Callback
from ray.tune.search import Searcher

from common.outputs import TUNE_DIR
from studies.engine.cluster import trial_request
from studies.engine.ledger import Ledger
from studies.engine.options import TrialResources
from studies.engine.progress import ProgressLine
from studies.engine.recovery import HEARTBEAT_INTERVAL_S
from studies.engine.run_fault import FaultStopper, RunFault
from studies.engine.scheduler import EarlyStopping
from studies.engine.signals import stop_cause, stopped_by
from studies.engine.trainable import run_trial
from studies.engine.trial_config import spec_of, tune_config
from studies.engine.tune_internals import trial_exception


class LedgerSearcher(Searcher):
    """Ray Tune asks the ledger for each trial's configuration."""

    def __init__(self, ledger: Ledger, fault: RunFault) -> None:
        super().__init__()
        self.ledger, self.fault = ledger, fault

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        spec = self.fault.guarded(self.ledger.ask, trial_id, default=None)
        if spec is not None:
            return tune_config(spec)
        if self.fault.error is not None:
            return None
        return Searcher.FINISHED if self.ledger.done() else None  # None: ask again later (a retry may come)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        """Endings are recorded by ``LedgerCallback``, which sees the error text."""

    def save(self, checkpoint_path: str) -> None:
        """Nothing to save: the Optuna store is the state, and a re-run resumes from it."""

    def restore(self, checkpoint_path: str) -> None:
        """See ``save``."""


class LedgerCallback(Callback):
    """Hands every result and trial ending to the ledger (runs in the driver); once the store failed
    (``RunFault``), nothing more: the rerun recovers what was running."""

    def __init__(self, ledger: Ledger, fault: RunFault) -> None:
        self.ledger, self.fault = ledger, fault
        self.last_heartbeat = time.monotonic()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if time.monotonic() - self.last_heartbeat > HEARTBEAT_INTERVAL_S:
            self.fault.guarded(self.ledger.heartbeat, default=None)
            self.last_heartbeat = time.monotonic()

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict, **info: Any) -> None:
        self.fault.guarded(self.ledger.record_report, spec_of(trial.config).number, result, default=None)

    def on_trial_complete(self, iteration: int, trials: list, trial, **info: Any) -> None:
        self.fault.guarded(self.ledger.finish, spec_of(trial.config).number, trial.last_result, None, default=None)

    def on_trial_error(self, iteration: int, trials: list, trial, **info: Any) -> None:
        exception = trial_exception(trial)
        error = _error_text(trial, exception)
        self.fault.guarded(self.ledger.finish, spec_of(trial.config).number, trial.last_result, error, exception, default=None)


def _error_text(trial, exception: BaseException | None) -> str:
    """The trial's exception in one line, then the end of its traceback.

    Tune writes the traceback to the trial's error file; when the worker process died the
    exception (e.g. ``ActorDiedError``) may be all there is.
    """
    text = ""
    with contextlib.suppress(OSError, TypeError):
        text = (trial.get_error() or "").strip() or Path(trial.error_file).read_text().strip()
    if not text and exception is not None:
        text = f"{type(exception).__name__}: {exception}"
    if not text:
        return "the trial ended with an error that Tune did not record"
    lines = [line for line in text.splitlines() if line.strip()]
    exception = next((line.strip() for line in reversed(lines) if ":" in line and not line.startswith(" ")), lines[-1].strip())
    return f"{exception}\n\n{text[-4000:]}"


def run_on_tune(ledger: Ledger, name: str, resources: TrialResources) -> None:
    """Run the ledger's trials on Ray Tune, at most ``Preset.parallel_trials`` at once, with early
    stopping (``EarlyStopping``; seed repeats and named points are never stopped).

    Raises:
        KeyboardInterrupt: Ctrl-C, SIGTERM, SIGHUP (``studies.engine.signals``) or SIGUSR1 (Ray Tune's
            own signal to stop a run); the running trials were failed first (``Ledger.interrupt``).
        Exception: the store filled up or failed, or Ray Tune's folder filled up (``RunFault``): the
            error met, once Tune stopped; the running trials were failed first where the store could
            still be written, else the rerun recovers them.
    """
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no tables, our progress line instead
    # Tune would swallow Ctrl-C and return as if done (exit 0, a partial report): let it raise.
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    request, fits = trial_request(resources)
    fault = RunFault()
    concurrency = min(fits, ledger.preset.parallel_trials)  # more would change no decision, only wait (ledger)
    tuner = tune.Tuner(
        tune.with_resources(run_trial, request),
        tune_config=tune.TuneConfig(
            search_alg=LedgerSearcher(ledger, fault),
            scheduler=EarlyStopping(ledger, fault),
            num_samples=-1,  # the searcher says when it is finished: retries may add trials
            max_concurrent_trials=concurrency,
            reuse_actors=True,  # a trial's worker runs the next one: no new process and imports per trial
            trial_dirname_creator=lambda trial: f"trial_{spec_of(trial.config).number}",
        ),
        run_config=tune.RunConfig(
            name=name,
            storage_path=str(TUNE_DIR.resolve()),
            callbacks=[LedgerCallback(ledger, fault), ProgressLine(ledger, concurrency)],
            stop=FaultStopper(fault),
            verbose=0,
        ),
    )
    try:
        with fault.ray_logs_watched():
            tuner.fit()
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP
        ledger.interrupt(stop_cause())
        raise
    if fault.error is not None:
        met, fault.error = fault.error, None  # guarded again: the store may refuse this too
        fault.guarded(ledger.interrupt, "its store or a disk failed", default=None)
        raise met
    if not ledger.done():  # Tune returned before the trials ended: its own SIGUSR1 handler stops a run (tune.py)
        stopped_by(signal.SIGUSR1)
        ledger.interrupt(stop_cause())
        raise KeyboardInterrupt(stop_cause())
