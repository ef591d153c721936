"""How a trial ended, stored with the trial at once and told to Optuna later (``studies.engine.ledger``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from storage import record
from studies.catalogue.tasks import Objective
from studies.engine.sampler import tell_infeasible
from studies.engine.trial_errors import failure_of
from studies.results.names import outcome_name


@dataclass(frozen=True)
class Ending:
    """How a trial ended, as Optuna will be told.

    Attributes:
        state: COMPLETE, PRUNED or FAIL.
        values: The objective values of a COMPLETE trial.
        infeasible: Why the configuration cannot train (told as infeasible, ``tell_infeasible``).
    """

    state: TrialState
    values: tuple[float, ...] | None = None
    infeasible: str | None = None

    @property
    def outcome(self) -> str:
        """What the progress line and the summary count it as (``names.outcome_name``)."""
        return outcome_name(self.state.name, bool(self.infeasible))

    def attribute(self) -> dict[str, Any]:
        """Plain data for the trial's ``ending`` attribute."""
        return {
            "state": self.state.name,
            "values": None if self.values is None else list(self.values),
            record.INFEASIBLE: self.infeasible,
        }

    @classmethod
    def of(cls, attribute: Mapping[str, Any]) -> Ending:
        """The ending an ``ending`` attribute records."""
        values = attribute.get("values")
        return cls(TrialState[attribute["state"]], None if values is None else tuple(values), attribute.get(record.INFEASIBLE))

    def tell(self, study: optuna.Study, trial: optuna.Trial) -> None:
        """Tell Optuna how ``trial``, a running trial of ``study``, ended."""
        if self.infeasible:
            tell_infeasible(study, trial, self.infeasible)
        else:
            study.tell(trial, None if self.values is None else list(self.values), state=self.state)


@dataclass(frozen=True)
class FinishedTrial:
    """A trial this run saw end, for its line in the run's output (``studies.engine.progress``).

    Attributes:
        number: Its trial number.
        family: Its family's label.
        knobs: Its sampled knob values.
        ending: How it ended.
        value: Its objective's last reported value (None: it reported none).
        step: The step of that report (where a stopped trial stopped).
        seconds: Its wall time, as the trial measured it.
        repeat_of: The trial whose configuration it repeats on a fresh seed (None: a search trial).
        point: The named point it trains (its own values are not among ``knobs``), or None.
        test_value: The objective on the held-out test split, which a seed repeat is judged by (None: not scored).
    """

    number: int
    family: str
    knobs: Mapping[str, Any]
    ending: Ending
    value: float | None
    step: int | None
    seconds: float | None
    repeat_of: int | None
    point: str | None = None
    test_value: float | None = None

    @classmethod
    def of(
        cls,
        number: int,
        attributes: Mapping[str, Any],
        knobs: Mapping[str, Any],
        ending: Ending,
        last: Mapping[str, Any],
        metric: str,
    ) -> FinishedTrial:
        """Trial ``number``, with these user ``attributes`` and sampled ``knobs``, that ended so after its ``last``
        report (``metric``: the study's first objective)."""
        value = last.get(metric)
        test_value = last.get(metric.replace("val_", "test_", 1))  # val_accuracy -> test_accuracy
        return cls(
            number,
            str(attributes.get(record.FAMILY, "")),
            dict(knobs),
            ending,
            None if value is None else float(value),
            int(last["step"]) if "step" in last else None,
            float(last[record.WALL_SECONDS]) if record.WALL_SECONDS in last else None,
            attributes.get(record.REPEAT_OF),
            attributes.get(record.POINT),
            None if test_value is None else float(test_value),
        )


@dataclass(frozen=True)
class TrialEnd:
    """What a trial's end says, before the ledger records it.

    Attributes:
        ending: How it ended.
        attributes: The user attributes that record it (its costs, the step it reached, why it failed or stopped).
        retry: A failure that another attempt may not meet (a dead worker, a shared GPU's out of memory): queue it
            again (``queue.retry``); a retried trial is not told infeasible.
    """

    ending: Ending
    attributes: dict[str, Any] = field(default_factory=dict)
    retry: bool = False


def trial_end(
    last: Mapping[str, Any], error: str | None, exception: BaseException | None, objectives: Sequence[Objective]
) -> TrialEnd:
    """How a trial ended, from its last report and its error.

    Args:
        last: Its last report (empty: it reported nothing).
        error: What its exception says (traceback included), or None when it ended without one.
        exception: The exception, as Ray Tune kept it (``studies.engine.trial_errors.failure_of`` reads it).
        objectives: The study's objectives, whose values a complete trial's final report holds.
    """
    attributes: dict[str, Any] = {name: last[name] for name in record.REPORTED if name in last}
    if "step" in last:
        attributes[record.REACHED_STEP] = int(last["step"])
    if error is not None:
        failure = failure_of(exception)
        first, newline, rest = error.partition("\n")
        attributes[record.ERROR] = f"{first}; {failure.fix}{newline}{rest}" if failure.fix else error
        if failure.diverged_at_step is not None:
            attributes[record.DIVERGED_AT_STEP] = failure.diverged_at_step
        return TrialEnd(Ending(TrialState.FAIL, infeasible=failure.infeasible), attributes, failure.retry)
    if last.get("final"):
        return TrialEnd(Ending(TrialState.COMPLETE, tuple(float(last[o.metric]) for o in objectives)), attributes)
    if "step" in last:
        return TrialEnd(Ending(TrialState.PRUNED), attributes | {record.PRUNED_AT_STEP: int(last["step"])})
    return TrialEnd(Ending(TrialState.FAIL), attributes | {record.ERROR: "stopped before its first report"})
