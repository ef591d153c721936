"""What a running study prints: a line per finished trial (family, knobs, value, state, time), and one
progress line whose ETA covers the seed repeats expected after the search."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import optuna

from studies.catalogue import LRA_SHARING
from studies.engine.progress import eta_seconds, expected_repeat_seconds, finished_line, progress_line
from studies.engine.queue import PlannedTrial, enqueue
from studies.engine.repeats import fewest_repeats, most_repeats
from studies.engine.wall_time import MEASURED_OVERHEADS
from tests.studies.test_ledger import make_ledger, report

CLOSING, NEXT_PHASE = MEASURED_OVERHEADS.closing, MEASURED_OVERHEADS.phase  # what the ETA adds around the trials


def test_each_finished_trial_gets_a_line_naming_its_family_knobs_value_state_and_time(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path, [], 3)
    numbers = [ledger.ask(f"ray-{i}").number for i in range(3)]
    ledger.finish(numbers[0], report(60, final=True), None)
    ledger.finish(numbers[1], report(20), None)  # stopped at step 20 of 60: pruned
    ledger.finish(numbers[2], report(20), "ValueError: boom")
    complete, stopped, failed = (finished_line(trial, ledger) for trial in ledger.endings)
    trial = ledger.study.trials[numbers[0]]
    knobs = " ".join(f"{k}={v}" for k, v in trial.params.items() if k not in ("attention", "metric_mode"))
    assert complete == f"trial {numbers[0]} · {trial.user_attrs['family']} · {knobs} · val acc 0.600 · complete · 00:01"
    assert "stopped early at step 20" in stopped and "val acc 0.200" in stopped
    assert failed.endswith("· fail · 00:01")


def test_a_seed_repeat_s_line_shows_the_test_value_it_is_judged_on(tmp_path: Path) -> None:
    planned = PlannedTrial(params={"attention": "mha", "d_model": 32, "num_heads": 2}, family="MHA", baseline=True)
    ledger = make_ledger(tmp_path, [planned], 0)
    first = ledger.ask("ray-0").number
    ledger.finish(first, report(60, final=True), None)
    enqueue(ledger.study, replace(PlannedTrial.of(ledger.study.trials[first]), repeat_of=first, repeat_index=1))
    ledger.total += 1  # as plan_repeats' run asks it
    repeat = ledger.ask("ray-1").number
    ledger.finish(repeat, report(60, final=True) | {"test_accuracy": 0.375}, None)
    line = finished_line(ledger.endings[-1], ledger)
    assert f"(seed repeat of trial {first})" in line and "· test acc 0.375 ·" in line and "0.600" not in line


def test_the_eta_counts_the_seed_repeats_after_the_search(tmp_path: Path) -> None:
    ahead = most_repeats(LRA_SHARING, 2)
    assert ahead == 2 * (len(LRA_SHARING.families) - 1 + len(LRA_SHARING.points)) * 2
    ledger = make_ledger(tmp_path, [], 4)
    ledger.then = ahead
    first = ledger.ask("ray-0").number
    ledger.finish(first, report(60, final=True), None)  # one trial of 1.5 s done: 3 + the repeats left
    line = progress_line(ledger, 10.0, eta_seconds(ledger, 1))
    assert line.startswith(f"trials 1/4 done (then up to {ahead} repeats) · 0 running · best val acc 0.600 · ")
    assert line.endswith(f"ETA 00:{int(1.5 * (3 + ahead) + NEXT_PHASE + CLOSING):02d}")  # the repeats' workers, the report


def test_the_repeats_expected_after_the_search_count_at_full_length(tmp_path: Path) -> None:
    """A quick run whose search stopped 16 of 28 trials half way showed ETA 04:25 with 16 min 37 s of seed
    repeats ahead: a repeat never stops early, so the trials that did count at the length they would have run."""
    ledger = make_ledger(tmp_path, [], 2)
    ledger.then = 2
    numbers = [ledger.ask(f"ray-{i}").number for i in range(2)]
    ledger.finish(numbers[0], report(30), None)  # stopped half way, after 1.5 s: 3 s at full length
    assert ledger.endings[0].step == 30
    # the 2 repeats at full length, the search trial left as measured
    assert eta_seconds(ledger, 1) == 3.0 * 2 + 1.5 + NEXT_PHASE + CLOSING


def test_a_named_point_s_line_names_it(tmp_path: Path) -> None:
    from studies.engine.queue import PlannedTrial

    (point,) = LRA_SHARING.points
    queued_point = PlannedTrial(params={"attention": "damcha", "metric_mode": "rowsum"}, family=point.family, point=point.label)
    ledger = make_ledger(tmp_path, [queued_point], 0)
    number = ledger.ask("ray-0").number
    ledger.finish(number, report(60, final=True), None)
    assert finished_line(ledger.endings[0], ledger).startswith(f"trial {number} · {point.family} ({point.label}) · ")


def test_between_endings_the_eta_only_runs_down_an_ending_re_estimates_it_and_0_means_nothing_left(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path, [], 3)
    numbers = [ledger.ask(f"ray-{i}").number for i in range(3)]
    ledger.finish(numbers[0], report(60, final=True), None)  # 1.5 s
    first = eta_seconds(ledger, 1)
    assert first == 1.5 * 2 + CLOSING
    assert eta_seconds(ledger, 1, previous=(10.0, 2, first), elapsed=11.0) == first - 1  # shown a second ago: 1 s less
    assert eta_seconds(ledger, 1, previous=(10.0, 2, first), elapsed=30.0) == 1.0  # overdue: a second, not 0
    slow = report(60, final=True) | {"wall_seconds": 30.0}
    ledger.finish(numbers[1], slow, None)  # the mean grows to 15.75 s: an estimate of 15.75 s for the one left
    # A trial ended: the estimate is what was measured, above the last one shown (which the slow trial proved wrong).
    assert eta_seconds(ledger, 1, previous=(10.0, 2, first), elapsed=11.0) == 15.75 + CLOSING
    again = eta_seconds(ledger, 1, previous=(11.0, 1, 15.75 + CLOSING), elapsed=14.0)
    assert again == 15.75 + CLOSING - 3  # and runs down again until the next ending
    ledger.total += 2  # work was added (a retry): re-estimated too
    assert eta_seconds(ledger, 1, previous=(11.0, 1, 15.75 + CLOSING), elapsed=14.0) == 15.75 * 3 + CLOSING
    ledger.total -= 2
    ledger.finish(numbers[2], report(60, final=True), None)
    assert eta_seconds(ledger, 1, previous=(10.0, 2, first), elapsed=11.0) == 0.0  # nothing left


def test_the_run_s_clock_counts_from_the_process_s_start() -> None:
    import subprocess
    import sys

    code = "import time; time.sleep(1.5); from studies.engine.progress import run_seconds; print(run_seconds())"
    seconds = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert seconds >= 1.5  # the sleep before the import counts: a run's imports and Ray's start are waited for too


def test_piped_progress_never_prints_the_same_line_twice(tmp_path: Path, monkeypatch) -> None:
    """Into a pipe (a log, CI), the run's end prints its progress line only when it says something new."""
    import io

    from studies.engine.progress import ProgressLine

    ledger = make_ledger(tmp_path, [], 2)
    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    progress = ProgressLine(ledger, 1)
    number = ledger.ask("ray-0").number
    ledger.finish(number, report(60, final=True), None)
    progress.on_step_end(0, [])
    progress.on_experiment_end([])  # nothing happened in between: no second line
    lines = [line for line in piped.getvalue().splitlines() if line.startswith("trials ")]
    assert len(lines) == 1, lines
    ledger.finish(ledger.ask("ray-1").number, report(60, final=True), None)
    progress.on_experiment_end([])  # the last trial ended: its line, then the new count
    lines = [line.split(" · ")[0] for line in piped.getvalue().splitlines() if line.startswith("trials ")]
    assert lines == ["trials 1/2 done", "trials 2/2 done"], lines


def test_the_eta_of_seed_repeats_counts_each_at_the_time_its_search_trial_took(tmp_path: Path) -> None:
    """Seed repeats start with the fastest configuration's: the mean of those that ended would say too little."""
    planned = PlannedTrial(params={"attention": "mha", "d_model": 32, "num_heads": 2}, family="MHA", baseline=True)
    ledger = make_ledger(tmp_path, [planned, replace(planned, params=planned.params | {"num_heads": 4})], 0)
    steps = ledger.preset.train.steps
    fast, slow = (ledger.ask(f"ray-{i}").number for i in range(2))
    ledger.finish(fast, report(steps, final=True), None)  # 1.5 s
    ledger.finish(slow, report(steps // 2) | {"wall_seconds": 15.0}, None)  # stopped halfway: 30 s at full length
    for original, index in ((fast, 1), (slow, 1), (slow, 2)):
        enqueue(ledger.study, replace(PlannedTrial.of(ledger.study.trials[original]), repeat_of=original, repeat_index=index))
    ledger.total += 3  # as plan_repeats' run asks it
    first = ledger.ask("ray-2").number
    ledger.finish(first, report(steps, final=True), None)  # the fast one's repeat: 1.5 s
    assert eta_seconds(ledger, 1) == 60.0 + CLOSING  # the slow one's two repeats, 30 s each (the mean of all that ended: 6 s)
    assert eta_seconds(ledger, 2) == 30.0 + CLOSING  # on two slots at once


def test_the_repeats_expected_in_the_search_are_those_the_verdict_would_compare_now(tmp_path: Path) -> None:
    """A quick run's search phase counted 36 repeats ahead, the most the verdict can compare, where it queued 24: the
    ETA counts those the configurations selected so far would take, each at its search trial's full length."""
    ledger = make_ledger(tmp_path, [], 6)
    ledger.then, ledger.repeat_seeds = most_repeats(LRA_SHARING, 2), 2
    assert expected_repeat_seconds(ledger) is None  # no search trial has ended
    steps = ledger.preset.train.steps
    for index in range(6):  # the last stopped half way after 1.5 s: 3 s at full length
        ledger.finish(ledger.ask(f"ray-{index}").number, report(steps, final=True) if index < 5 else report(steps // 2), None)
    expected = expected_repeat_seconds(ledger)
    assert fewest_repeats(LRA_SHARING, 2) <= len(expected) <= most_repeats(LRA_SHARING, 2)
    assert set(expected) <= {1.5, 3.0}  # each at its search trial's time, at full length
    # this phase has nothing left: the repeats one after the other, their workers' start, the report
    assert eta_seconds(ledger, 1, expected_repeats=expected) == sum(expected) + NEXT_PHASE + CLOSING
    ledger.repeat_seeds = 0  # no repeats after this phase: nothing expected
    assert expected_repeat_seconds(ledger) is None


def test_the_eta_of_repeats_slowed_by_load_learns_their_pace(tmp_path: Path) -> None:
    """On a loaded machine seed repeats ran 2-3x slower than the search trials whose times they were expected to take
    ("ETA 01:13" with 20 minutes of repeats left): from a quarter of the repeats on, the ETA is within 25% of the time
    they take, here 3x their search trials' (before, a third of it)."""
    from studies.engine.progress import repeat_pace

    planned = PlannedTrial(params={"attention": "mha", "d_model": 32, "num_heads": 2}, family="MHA", baseline=True)
    ledger = make_ledger(tmp_path, [planned, replace(planned, params=planned.params | {"num_heads": 4})], 0)
    steps = ledger.preset.train.steps
    originals = [ledger.ask(f"ray-{i}").number for i in range(2)]
    for number in originals:
        ledger.finish(number, report(steps, final=True), None)  # 1.5 s each
    for index in range(1, 5):
        for original in originals:
            enqueue(ledger.study, replace(PlannedTrial.of(ledger.study.trials[original]), repeat_of=original, repeat_index=index))
    ledger.total += 8
    assert repeat_pace(ledger) is None  # no repeat has ended: the search's times, as they are
    # A phase of repeats starts with none ended (a ledger of its own): 8 repeats at their search trials' 1.5 s.
    # (Its line said "ETA --:--" until a repeat ended.)
    ended, finished = list(ledger.endings), dict(ledger.finished)
    ledger.endings.clear()
    ledger.finished = dict.fromkeys(finished, 0)
    ledger.total -= 2
    assert eta_seconds(ledger, 1) == 8 * 1.5 + CLOSING
    ledger.endings[:], ledger.finished, ledger.total = ended, finished, ledger.total + 2
    slowed = report(steps, final=True) | {"wall_seconds": 4.5}
    for done in range(1, 9):
        ledger.finish(ledger.ask(f"ray-r{done}").number, slowed, None)
        left = 4.5 * (8 - done) + (CLOSING if done < 8 else 0.0)
        if done >= 2:  # a quarter of the repeats on
            assert abs(eta_seconds(ledger, 1) - left) <= 0.25 * left, done
        if done == 4:  # the line of a phase of repeats (its ledger's search study another's) says the pace, and no best
            searching = ledger.store
            other = optuna.load_study(study_name=ledger.study.study_name, storage=ledger.storage)
            ledger.store = replace(ledger.store, search=other)
            line = progress_line(ledger, 10.0, eta_seconds(ledger, 1))
            assert line.startswith("seed repeats 6/10 done · 0 running · 00:10 elapsed · ETA ")
            assert line.endswith(" at 3.0x the search's trial times") and "best" not in line
            ledger.store = searching
    assert repeat_pace(ledger) == 3.0
