"""Early stopping: ASHA over every family's searched trials alike; seed repeats always train to the end."""

from __future__ import annotations

from ray.tune.schedulers import ASHAScheduler, TrialScheduler


class ASHAExceptRepeats(ASHAScheduler):
    """ASHA for every family's searched trials alike; a seed repeat trains to its last step.

    A repeat measures its configuration again on a fresh seed, so stopping it early would
    leave no result. Repeats run after the search, unless an earlier run left some queued.
    """

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        if trial.config.get("repeat"):
            return TrialScheduler.CONTINUE
        return super().on_trial_result(tune_controller, trial, result)
