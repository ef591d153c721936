"""What a running study shows instead of Ray's table dump: one line per finished trial, and one live
progress line with the run's overall ETA (this phase's trials, the seed repeats expected after it and the
time around them, as the plan counts it: ``studies.engine.wall_time``)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import optuna
from optuna.trial import FrozenTrial, TrialState
from ray.tune import Callback

from storage import record
from studies.catalogue.schema import Preset, Study
from studies.catalogue.tasks import Objective
from studies.engine.endings import FinishedTrial
from studies.engine.repeats import fewest_repeats, repeats_due
from studies.engine.wall_time import MEASURED_OVERHEADS, packed_seconds
from studies.results.quality import quality_named


class LedgerView(Protocol):
    """What progress reads of a ``studies.engine.ledger.Ledger``, and never writes."""

    study: optuna.Study  # the phase's: the search's, or its study of seed repeats
    search: optuna.Study
    definition: Study
    preset: Preset
    objective: Objective
    total: int  # trials this phase may see end
    then: int  # seed repeats, at most, expected after this phase
    repeat_seeds: int
    best_value: float | None
    endings: list[FinishedTrial]  # each trial this run saw end, in order

    def finished_count(self) -> int: ...

    def running(self) -> int: ...


def clock(seconds: float) -> str:
    """``MM:SS`` (minutes past an hour go on counting: ``75:03``)."""
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes:02d}:{seconds:02d}"


def run_seconds() -> float:
    """Seconds since this process started (imports and Ray's start included: what a user waits for), from
    ``/proc/self/stat``; where that cannot be read, since this module was imported."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(uptime - ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED


_IMPORTED = time.monotonic()


def progress_line(ledger: LedgerView, elapsed: float, seconds: float | None) -> str:
    """``trials 3/12 done · 2 running · best val acc 0.412 · 01:02 elapsed · ETA 03:10`` (``bpb`` for bits per byte).

    The best value is the search's, on the validation split, and named so; the seed repeats' phase shows none
    (its trials are judged on the test split, by the means the verdict compares, not by a best single one).

    Args:
        ledger: The phase's ledger.
        elapsed: Seconds since the run began (its imports and Ray's start included).
        seconds: The ETA (``eta_seconds``; None: not known yet).
    """
    done = ledger.finished_count()
    running = ledger.running()
    name = quality_named(ledger.objective.metric, ledger.objective.direction == "maximize").short
    best = "-" if ledger.best_value is None else f"{ledger.best_value:.3f}"
    eta = "--:--" if seconds is None else clock(seconds)
    then = f" (then up to {ledger.then} repeats)" if ledger.then else ""
    searching = ledger.study is ledger.search
    if seconds and not searching:  # the repeats' ETA rests on the search's times: at what pace, said
        pace = repeat_pace(ledger)
        eta += " from the search's trial times" if pace is None else f" at {pace:.1f}x the search's trial times"
    what = f"trials {done}/{ledger.total} done{then}" if searching else f"seed repeats {done}/{ledger.total} done"
    best_part = f" · best val {name} {best}" if searching else ""
    return f"{what} · {running} running{best_part} · {clock(elapsed)} elapsed · ETA {eta}"


def eta_seconds(
    ledger: LedgerView,
    concurrency: int,
    previous: tuple[float, int, float] | None = None,
    elapsed: float = 0.0,
    expected_repeats: Sequence[float] | None = None,
) -> float | None:
    """Seconds left, as the plan counts a run (``studies.engine.wall_time``): this phase's trials left, then the seed
    repeats expected after it, each phase's trials on ``concurrency`` slots, the next phase's workers' start and the
    closing summary and report. A seed repeat queued or running counts at the wall time of the search trial it
    repeats (at full length); one expected after the search at ``expected_repeats``' time (default: ``ledger.then`` of
    them at the mean wall time of this run's trials scaled to full length: a repeat never stops early); any other
    trial at that mean as measured. A seed repeat's time is scaled by the pace this phase's finished repeats kept
    against their search trials' times (``repeat_pace``: a loaded machine ran them 2-3x slower). None before a trial
    has ended, unless seed repeats are queued (their search trials' times stand in). Between two trials' endings
    never more than the previous ETA less the time since (a trial's end may raise it: what was measured changed);
    at least a second while any is left.

    Args:
        previous: ``(elapsed, trials left, ETA seconds)`` of the last line shown.
        elapsed: Seconds since the run began.
        expected_repeats: Each seed repeat expected after this phase, its wall seconds (``expected_repeat_seconds``).
    """
    left = trials_left(ledger, expected_repeats)
    if left <= 0:
        return 0.0
    timed = [trial for trial in ledger.endings if trial.seconds is not None]
    in_phase = ledger.total - ledger.finished_count()
    pace = repeat_pace(ledger) or 1.0  # read once: it reads the store
    known = [seconds * pace for seconds in _repeat_seconds(ledger)[:in_phase]]
    if not timed and not known:
        return None
    steps = ledger.preset.train.steps
    if timed:
        mean = sum(trial.seconds for trial in timed) / len(timed)
        full_length = sum(trial.seconds * steps / trial.step if trial.step else trial.seconds for trial in timed) / len(timed)
    else:  # the repeat phase before its first ending: its search trials' times, as they are
        mean = full_length = sum(known) / len(known)
    phase = known + [mean] * (in_phase - len(known))
    after = list(expected_repeats) if expected_repeats is not None else [full_length] * ledger.then
    estimate = packed_seconds(sum(phase), len(phase), concurrency) + packed_seconds(sum(after), len(after), concurrency)
    estimate += MEASURED_OVERHEADS.closing + (MEASURED_OVERHEADS.phase if after else 0.0)
    if previous is not None:
        shown_at, left_then, eta_then = previous
        if left == left_then:  # no trial ended and none was added: the clock only runs down
            estimate = min(estimate, eta_then - (elapsed - shown_at))
    return max(estimate, 1.0)


def trials_left(ledger: LedgerView, expected_repeats: Sequence[float] | None = None) -> int:
    """Trials this run has still to see end: this phase's, then the seed repeats expected after it (``then`` of them
    unless ``expected_repeats`` says)."""
    ahead = ledger.then if expected_repeats is None else len(expected_repeats)
    return ledger.total - ledger.finished_count() + ahead


def expected_repeat_seconds(ledger: LedgerView) -> list[float] | None:
    """Each seed repeat the run would queue if this phase ended now (``repeats_due``), at the full-length wall time of
    the search trial it repeats, and at least the fewest a run queues (``fewest_repeats``), the missing ones at those
    times' mean; None when no repeat follows this phase or no search trial has ended."""
    if not ledger.then or not ledger.repeat_seeds:
        return None
    trials = ledger.search.get_trials(deepcopy=False)
    seconds = [
        full
        for planned in repeats_due(ledger.search, ledger.repeat_seeds)
        if (full := _full_length_seconds(trials[planned.repeat_of], ledger.preset.train.steps)) is not None
    ]
    if not seconds:
        return None
    fewest = min(fewest_repeats(ledger.definition, ledger.repeat_seeds), ledger.then)
    return seconds + [sum(seconds) / len(seconds)] * (fewest - len(seconds))


def _full_length_seconds(trial: FrozenTrial, steps: int) -> float | None:
    """A search trial's wall time scaled to ``steps`` from the last step it reached (it may have stopped early)."""
    wall, reached = trial.user_attrs.get(record.WALL_SECONDS), trial.user_attrs.get(record.REACHED_STEP)
    return float(wall) * steps / int(reached) if wall is not None and reached else None


def repeat_pace(ledger: LedgerView) -> float | None:
    """How much longer this phase's finished seed repeats took than the search trials they repeat (at full
    length): their wall seconds' sum over those trials'; None before one has ended."""
    originals = ledger.search.get_trials(deepcopy=False)
    steps = ledger.preset.train.steps
    pairs = [
        (trial.seconds, expected)
        for trial in ledger.endings
        if trial.repeat_of is not None
        and trial.seconds is not None
        and (expected := _full_length_seconds(originals[trial.repeat_of], steps))
    ]
    return sum(taken for taken, _ in pairs) / sum(expected for _, expected in pairs) if pairs else None


def _repeat_seconds(ledger: LedgerView) -> list[float]:
    """The expected wall seconds of each seed repeat queued or running: the search trial it repeats took that
    long (scaled to the last step where it was stopped early). Seed repeats start with the fastest
    configurations' (MHA's), so the mean of those that ended would say too little for the rest."""
    originals = ledger.search.get_trials(deepcopy=False)  # what ``repeat_of`` numbers
    steps = ledger.preset.train.steps
    seconds = []
    for trial in ledger.study.get_trials(deepcopy=False):
        if (
            trial.state not in (TrialState.WAITING, TrialState.RUNNING)
            or (original := trial.user_attrs.get(record.REPEAT_OF)) is None
        ):
            continue
        if (full := _full_length_seconds(originals[original], steps)) is not None:
            seconds.append(full)
    return seconds


def finished_line(trial: FinishedTrial, ledger: LedgerView) -> str:
    """``trial 7 · DAMCHA (cross) · d_model=32 num_heads=4 ... · val acc 0.581 · complete · 01:42``: a trial that
    ended (a seed repeat: ``repeat 2 (seed repeat of trial 7) · ... · test acc``, the split it is judged on)."""
    measured = quality_named(ledger.objective.metric, ledger.objective.direction == "maximize")
    said = ledger.definition.pinned_knobs()  # the family's label names them
    knobs = " ".join(f"{name}={value}" for name, value in trial.knobs.items() if name not in said)
    # a seed repeat is judged on the test split: its line shows that, labelled; a search trial's, validation
    judged = trial.repeat_of is not None and trial.test_value is not None
    split, value_of = ("test", trial.test_value) if judged else ("val", trial.value)
    value = "-" if value_of is None else f"{value_of:.3f}"
    state = trial.ending.outcome.lower()
    if trial.ending.state.name == "PRUNED" and trial.step is not None:
        state = f"stopped early at step {trial.step}"
    # a seed repeat is numbered in the study of repeats (``storage.repeats_study``): said so, with the trial it repeats
    name = (
        f"repeat {trial.number} (seed repeat of trial {trial.repeat_of})"
        if trial.repeat_of is not None
        else f"trial {trial.number}"
    )
    took = "" if trial.seconds is None else f" · {clock(trial.seconds)}"
    family = f"{trial.family} ({trial.point})" if trial.point else trial.family
    return f"{name} · {family} · {knobs} · {split} {measured.short} {value} · {state}{took}"


class ProgressLine(Callback):
    """Rewrites one line on a terminal (or prints a line per change elsewhere), at most once a second."""

    def __init__(self, ledger: LedgerView, concurrency: int) -> None:
        self.ledger, self.concurrency = ledger, concurrency
        self.last_shown, self.last_line = 0.0, ""
        self.said = 0  # how many of the ledger's finished trials have their line
        self.previous: tuple[float, int, float] | None = None  # the last ETA shown: (elapsed, trials left, seconds)
        self.expected: tuple[int, list[float] | None] = (-1, None)  # (trials finished, the repeats expected then)

    def _expected_repeats(self) -> list[float] | None:
        """``expected_repeat_seconds``, computed again only when a trial has ended since (it reads the search's trials)."""
        finished = self.ledger.finished_count()
        if self.expected[0] != finished:
            self.expected = (finished, expected_repeat_seconds(self.ledger))
        return self.expected[1]

    def _line(self) -> str:
        """The progress line now, the run's elapsed time counted from the process's start (not the phase's)."""
        elapsed = run_seconds()
        expected = self._expected_repeats()
        seconds = eta_seconds(self.ledger, self.concurrency, self.previous, elapsed, expected)  # reads the store: once a line
        if seconds is not None:
            self.previous = (elapsed, trials_left(self.ledger, expected), seconds)
        return progress_line(self.ledger, elapsed, seconds)

    def _show(self, line: str, ended: bool = False) -> None:
        """Draw ``line`` over the live one on a terminal (``ended``: for good); piped, print it only when it says
        something new."""
        stream = sys.stderr  # looked up at each write: Tune pickles its callbacks, and streams don't pickle
        if stream.isatty():
            stream.write("\r" + line.ljust(len(self.last_line)) + ("\n" if ended else ""))
        elif line.split(" · ")[:3] != self.last_line.split(" · ")[:3]:
            stream.write(line + "\n")
        stream.flush()
        self.last_line = line

    def _say_endings(self) -> None:
        """A line for each trial that ended since the last call, above the live line (drawn again after them)."""
        stream = sys.stderr
        for trial in self.ledger.endings[self.said :]:
            stream.write(
                ("\r" + " " * len(self.last_line) + "\r" if stream.isatty() else "") + finished_line(trial, self.ledger) + "\n"
            )
            self.last_line, self.last_shown = "", 0.0
        self.said = len(self.ledger.endings)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        now = time.monotonic()
        self._say_endings()
        if now - self.last_shown < 1.0:
            sys.stderr.flush()
            return
        self.last_shown = now
        self._show(self._line())

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self._say_endings()
        self._show(self._line(), ended=True)
