"""Early stopping on Ray Tune: each reported value is judged by the ledger (``Ledger.stops``: the preset's
rule, ASHA's median or dominance, within the trial's family, on a view of the store that does not depend
on finishing order)."""

from __future__ import annotations

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from studies.engine.ledger import Ledger


class EarlyStopping(FIFOScheduler):
    """Stops a searched trial where ``Ledger.stops`` says; seed repeats and named points always go on.

    Args:
        ledger: The run's ledger.
    """

    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        self.ledger = ledger

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        metric = self.ledger.objective.metric
        if "step" not in result or metric not in result:
            return TrialScheduler.CONTINUE
        stops = self.ledger.stops(trial.config["number"], int(result["step"]), float(result[metric]))
        return TrialScheduler.STOP if stops else TrialScheduler.CONTINUE
