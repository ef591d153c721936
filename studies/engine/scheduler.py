"""Early stopping on Ray Tune: each reported value is judged by the ledger (``Ledger.stops``: the preset's
rule, ASHA's median or dominance, within the trial's family, on a view of the store that does not depend
on finishing order)."""

from __future__ import annotations

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from studies.engine.ledger import Ledger
from studies.engine.run_fault import RunFault
from studies.engine.trial_config import spec_of


class EarlyStopping(FIFOScheduler):
    """Stops a searched trial where ``Ledger.stops`` says; seed repeats and named points always go on.

    Args:
        ledger: The run's ledger.
        fault: The run's store or disk failure, kept (``RunFault``): a view of a failed store decides nothing.
    """

    def __init__(self, ledger: Ledger, fault: RunFault) -> None:
        super().__init__()
        self.ledger, self.fault = ledger, fault

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        metric = self.ledger.objective.metric
        if "step" not in result or metric not in result:
            return TrialScheduler.CONTINUE
        number, step, value = spec_of(trial.config).number, int(result["step"]), float(result[metric])
        stops = self.fault.guarded(self.ledger.stops, number, step, value, default=False)
        return TrialScheduler.STOP if stops else TrialScheduler.CONTINUE
