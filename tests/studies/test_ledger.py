"""The ledger records each ending in a real SQLite store: complete, pruned, failed with its message."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from ray.exceptions import ActorDiedError

from search_space.knobs import KNOBS, RULES
from search_space.space import Choice, SearchSpace, SearchSpaceError
from storage import open_storage, record
from studies.catalogue import LRA_SHARING
from studies.catalogue.schema import Family, Preset, Study
from studies.engine.endings import Ending
from studies.engine.ledger import Asking, Ledger, LedgerStore, TrialSetup
from studies.engine.queue import PlannedTrial, enqueue, queued, trial_id
from studies.engine.recovery import heartbeat_options
from studies.engine.sampler import TRAINABLE
from studies.engine.study_space import preset_space
from studies.results.frame import outcome, trials_frame
from studies.results.names import INFEASIBLE, LOST_DRIVER_ERROR

PRESET = LRA_SHARING.preset("smoke")


def make_ledger(
    tmp_path: Path,
    queue: list[PlannedTrial],
    searched: int,
    *,
    definition: Study = LRA_SHARING,
    preset: Preset = PRESET,
    space: SearchSpace | None = None,
    fixed: dict | None = None,
    sampler: optuna.samplers.BaseSampler | None = None,
) -> Ledger:
    """A ledger over a new study in a real SQLite store, with ``queue`` in the store's queue and a
    budget of ``searched`` more trials (``preset``'s space unless ``space``)."""
    storage = open_storage(f"sqlite:///{tmp_path / 'store.db'}", **heartbeat_options())
    store = optuna.create_study(storage=storage, directions=["maximize", "minimize"], sampler=sampler)
    for planned in queue:
        enqueue(store, planned)
    return Ledger(
        LedgerStore(store, storage),
        Asking(definition, preset, space or preset_space(definition, preset), len(queue) + searched, fix=fixed or {}, seed=3),
        TrialSetup(str(tmp_path), run_attributes={"preset": "smoke"}),
    )


def report(step: int, final: bool = False) -> dict:
    return {
        "step": step,
        "val_accuracy": step / 100,
        "final": final,
        "flops_per_example": 1000.0,
        "parameters": 10,
        "wall_seconds": 1.5,
    }


def test_endings_are_recorded_with_curves_costs_and_errors(tmp_path: Path) -> None:
    queued_first = PlannedTrial(params={"attention": "mha", "d_model": 32, "num_heads": 4}, family="MHA", baseline=True)
    ledger = make_ledger(tmp_path, [queued_first], 3)
    configs = [ledger.ask(f"ray-{i}") for i in range(4)]
    assert ledger.ask("ray-4") is None  # budget spent
    assert configs[0].model["attention"] == "mha" and configs[0].model["num_heads"] == 4
    # The queue first, then the family with the fewest trials: the budget splits evenly.
    assert [t.user_attrs["family"] for t in ledger.study.get_trials()] == ["MHA", "DAMCHA (paper)", "DAMCHA (cross)", "MHA"]
    assert [c.model["metric_mode"] for c in configs[1:3]] == ["rowsum", "cross"] and configs[3].model["attention"] == "mha"
    assert len({config.train.seed for config in configs}) == 4

    for step in (20, 40, 60):
        ledger.record_report(0, report(step, final=step == 60))
    ledger.finish(0, report(60, final=True), None)
    ledger.record_report(1, report(20))
    ledger.finish(1, report(20), None)
    ledger.finish(2, report(20), "ValueError: boom\n\nTraceback ...")
    ledger.finish(3, None, None)

    trials = ledger.study.get_trials()
    assert trials[0].state == TrialState.COMPLETE and trials[0].values == [0.6, 1000.0]
    assert trials[0].intermediate_values == {20: 0.2, 40: 0.4, 60: 0.6}
    assert trials[0].user_attrs["baseline"] is True and trials[0].user_attrs["ray_trial_id"] == "ray-0"
    assert trials[0].user_attrs["seed"] == 300_000 and trials[0].user_attrs["wall_seconds"] == 1.5
    assert trials[1].state == TrialState.PRUNED and trials[1].user_attrs["pruned_at_step"] == 20 == trials[1].last_step
    assert trials[2].state == TrialState.FAIL and trials[2].user_attrs["error"].startswith("ValueError: boom")
    assert trials[3].state == TrialState.FAIL and trials[3].user_attrs["error"] == "stopped before its first report"
    assert ledger.finished == {"COMPLETE": 1, "PRUNED": 1, "FAIL": 2, INFEASIBLE: 0}


def test_a_dead_worker_is_retried_at_most_twice_and_an_exception_never(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path, [], 2)
    first, other = ledger.ask("a"), ledger.ask("b")
    ledger.finish(other.number, report(20), "ValueError: training raised", ValueError("training raised"))
    assert ledger.ask("c") is None and not queued(ledger.study)  # an exception is not retried
    died = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
    number = first.number
    for attempt in (1, 2):
        ledger.finish(number, report(20), died, ActorDiedError())
        retry = ledger.ask(f"retry-{attempt}")
        assert retry is not None and retry.model == first.model
        trial = ledger.study.get_trials()[-1]
        assert (
            trial.user_attrs["retry_of"] == number and "ActorDiedError" in ledger.study.get_trials()[number].user_attrs["error"]
        )
        number = retry.number
    ledger.finish(number, report(20), died, ActorDiedError())
    assert ledger.ask("retry-3") is None and ledger.done()  # two retries, then given up


def damcha_only(space: SearchSpace) -> Study:
    """The study over ``space`` with one family, DAMCHA, that samples every knob."""
    return replace(LRA_SHARING, space=space, families=(Family("DAMCHA", {"attention": "damcha"}, baseline=True),), points=())


def rule_breaking_ledger(tmp_path: Path, sampler: optuna.samplers.BaseSampler) -> Ledger:
    """40 DAMCHA trials over metric_mode x metric_form, where rowsum with mahalanobis is forbidden."""
    space = SearchSpace(knobs=KNOBS, searched=("attention", "metric_mode", "metric_form"), rules=RULES)
    return make_ledger(tmp_path, [], 40, definition=damcha_only(space), space=space, sampler=sampler)


def run_all(ledger: Ledger) -> None:
    for number in range(40):
        config = ledger.ask(f"ray-{number}")
        assert not (config.model["metric_mode"] == "rowsum" and config.model["metric_form"] != "bilinear")
        ledger.finish(config.number, report(60, final=True), None)


def test_forbidden_combinations_are_infeasible_before_training_and_the_sampler_learns_the_rule(tmp_path: Path) -> None:
    ledger = rule_breaking_ledger(tmp_path, optuna.samplers.TPESampler(seed=0))
    run_all(ledger)
    trials = ledger.study.get_trials()
    rejected = [t for t in trials if outcome(t) == INFEASIBLE]
    assert rejected and all(t.user_attrs["error"].startswith("rejected before training: forbidden combination") for t in rejected)
    assert all(t.user_attrs[record.INFEASIBLE] == "forbidden combination" for t in rejected)
    assert all(t.state == TrialState.COMPLETE and t.constraints == {TRAINABLE: 1.0} for t in rejected)  # Optuna's own terms
    assert len(trials) - len(rejected) == 40  # they use no budget
    late = trials[len(trials) // 2 :]  # told, TPE proposes the forbidden corner less than its prior 1/4
    assert sum(outcome(t) == INFEASIBLE for t in late) < len(late) / 4


def test_a_sampler_that_keeps_breaking_the_rules_stops_the_run(tmp_path: Path) -> None:
    space = SearchSpace(knobs=KNOBS, searched=("attention", "metric_mode", "metric_form"), rules=RULES)
    space = space.narrowed({"metric_mode": Choice(("rowsum",)), "metric_form": Choice(("mahalanobis",))})  # all forbidden
    ledger = make_ledger(tmp_path, [], 40, definition=damcha_only(space), space=space)
    with pytest.raises(SearchSpaceError, match="50 sampled configurations in a row broke the study's rules"):
        ledger.ask("ray-0")


def test_a_pinned_damcha_knob_applies_to_damcha_trials_and_mha_trials_ignore_it(tmp_path: Path) -> None:
    from studies.engine.options import pinned_space, without_contradicted_points

    space, others = pinned_space(LRA_SHARING, PRESET, {"generator_width": 16})  # not searched by the study
    assert others == {"generator_width": 16}
    definition, left_out = without_contradicted_points(LRA_SHARING, others)  # the authors' widths are (256, 512)
    assert definition.points == () and left_out == [
        "the authors' configuration is not trained: --fix generator_width=16 contradicts its own values"
    ]
    ledger = make_ledger(tmp_path, [], 3, definition=definition, space=space, fixed=others)
    configs = [ledger.ask(f"ray-{i}") for i in range(3)]
    assert configs[0].model["attention"] == "mha"
    assert all(c.model["attention"] == "damcha" and c.model["generator_width"] == 16 for c in configs[1:])


def test_trials_train_at_the_preset_s_learning_rate_and_weight_decay_unless_the_user_fixes_one(tmp_path: Path) -> None:
    """A study that does not search the learning rate trains at its preset's (not the knob's default)."""
    from studies.engine.options import pinned_space

    searched = tuple(name for name in LRA_SHARING.space.searched if name != "learning_rate")
    definition = replace(LRA_SHARING, space=replace(LRA_SHARING.space, searched=searched), points=())
    domains = {name: domain for name, domain in PRESET.domains.items() if name != "learning_rate"}
    preset = replace(PRESET, train=replace(PRESET.train, learning_rate=3e-3, weight_decay=0.05), domains=domains)
    for folder in ("preset", "fixed"):
        (tmp_path / folder).mkdir()
    ledger = make_ledger(tmp_path / "preset", [], 3, definition=definition, preset=preset)
    configs = [ledger.ask(f"ray-{i}") for i in range(3)]
    assert [(c.train.learning_rate, c.train.weight_decay) for c in configs] == [(3e-3, 0.05)] * 3
    assert [t.user_attrs["train_config"]["learning_rate"] for t in ledger.study.get_trials()] == [3e-3] * 3

    space, others = pinned_space(definition, preset, {"learning_rate": 2e-4})
    ledger = make_ledger(tmp_path / "fixed", [], 3, definition=definition, preset=preset, space=space, fixed=others)
    configs = [ledger.ask(f"ray-{i}") for i in range(3)]
    assert [(c.train.learning_rate, c.train.weight_decay) for c in configs] == [(2e-4, 0.05)] * 3


def test_each_family_searches_its_learning_rate_and_the_authors_configuration_trains_as_they_specify(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path, [], 6)
    configs = [ledger.ask(f"ray-{i}") for i in range(4)]  # MHA, the authors' configuration, DAMCHA (cross), MHA
    trials = ledger.study.get_trials()
    assert trials[1].user_attrs["point"] == "authors' configuration" and "learning_rate" not in trials[1].params
    assert (configs[1].train.learning_rate, configs[1].train.weight_decay) == (3e-4, 0.0)  # Adam at 3e-4
    for index in (0, 2, 3):
        assert trials[index].params["learning_rate"] in PRESET.domains["learning_rate"].values
        assert configs[index].train.learning_rate == trials[index].params["learning_rate"]
        assert configs[index].train.weight_decay == PRESET.train.weight_decay


def test_out_of_memory_on_a_shared_gpu_is_retried_then_told_to_the_sampler(tmp_path: Path) -> None:
    from studies.engine.queue import MAX_RETRIES
    from studies.engine.trial_errors import SharedGPUOutOfMemoryError

    ledger = make_ledger(tmp_path, [], 1)
    number = ledger.ask("ray-0").number
    exception = SharedGPUOutOfMemoryError("CUDA out of memory", True, None, 0.5)
    for attempt in range(MAX_RETRIES + 1):
        ledger.finish(number, None, f"SharedGPUOutOfMemoryError: {exception}", exception)
        retried = bool(queued(ledger.study))
        if attempt < MAX_RETRIES:
            assert retried and queued(ledger.study)[0].user_attrs["retry_of"] == number
            number = ledger.ask(f"ray-{attempt + 1}").number
    assert not retried  # given up after its retries...
    trials = ledger.study.get_trials()
    assert [record.INFEASIBLE in t.user_attrs for t in trials] == [False] * MAX_RETRIES + [True]  # ...then it cannot fit
    assert ledger.ask("ray-last") is None


def test_each_trial_gets_the_run_s_one_absolute_compile_cache(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path, [], 2)
    folders = {ledger.ask(f"ray-{i}").compile_cache_dir for i in range(2)}
    assert len(folders) == 1 and Path(folders.pop()).is_absolute()


def test_a_silent_driver_s_trials_are_failed_by_optuna_s_heartbeat_and_queued_again(tmp_path: Path) -> None:
    from studies.engine.queue import retry
    from studies.engine.recovery import recover_interrupted

    url = f"sqlite:///{tmp_path / 'store.db'}"
    storage = open_storage(url, heartbeat_interval=1, grace_period=1, heartbeat_stale_trial_callback=retry)
    store = optuna.create_study(storage=storage, directions=["maximize", "minimize"])
    ledger = Ledger(
        LedgerStore(store, storage), Asking(LRA_SHARING, PRESET, preset_space(LRA_SHARING, PRESET), 2), TrialSetup(str(tmp_path))
    )
    silent, alive = ledger.ask("silent").number, ledger.ask("alive").number
    time.sleep(2.5)  # past the grace period...
    storage.record_heartbeat(ledger.held.trial_ids[alive])  # ...for the trial whose driver stopped beating
    recover_interrupted(store, storage, exclusive=False)  # another driver's view of the store
    trials = store.get_trials()
    assert trials[silent].state == TrialState.FAIL and trials[alive].state == TrialState.RUNNING
    (retry,) = queued(store)
    assert retry.user_attrs == {"family": "MHA", "baseline": True, "retry_of": silent, "attempt": 1}
    assert ledger.ask("next") is None  # this driver's own budget is spent; the queued retry is the next run's
    assert trials_frame(store).set_index("number").loc[silent, "error"] == LOST_DRIVER_ERROR


def test_early_stopping_judges_a_trial_against_its_family_in_a_view_fixed_at_its_ask(tmp_path: Path) -> None:
    """ASHA's rule within the family, on the trials numbered below ``n - decision_lag``: what finished
    later, or another family, changes nothing; named points and seed repeats never stop."""
    ledger = make_ledger(tmp_path, [], 9)
    lag, grace = PRESET.decision_lag, PRESET.grace_steps
    numbers = [ledger.ask(f"ray-{i}").number for i in range(lag + 1)]  # trial lag+1 waits for trial 0 to end
    assert ledger.ask("ray-early") is None and ledger.asked == lag + 1
    for number, value in zip(numbers[:3], (0.9, 0.5, 0.8), strict=True):  # MHA, the authors' configuration, DAMCHA (cross)
        ledger.record_report(number, {"step": grace, "val_accuracy": value})
        ledger.finish(number, report(PRESET.train.steps, final=True) | {"val_accuracy": value}, None)
    later = [ledger.ask(f"ray-{i}").number for i in range(3)]
    families = [t.user_attrs["family"] for t in ledger.study.get_trials()]
    assert families[: len(numbers) + 3] == ["MHA", "DAMCHA (paper)", "DAMCHA (cross)"] * 2 + ["MHA"]
    mha_later = later[-1]  # its view holds trial 0 (MHA, 0.9 at the grace step)
    assert ledger.stops(mha_later, grace, 0.1) and not ledger.stops(mha_later, grace, 0.1)  # each rung judged once
    assert not ledger.stops(numbers[3], grace, 0.1)  # MHA's second trial: its view (numbers < 0) holds nothing
    assert not ledger.stops(later[0], grace, 0.0)  # DAMCHA (paper): only the named point in view, and it stays
    assert not ledger.stops(numbers[1], grace, 0.0)  # the named point itself never stops

    repeats = make_ledger(
        tmp_path / "repeats", [PlannedTrial(params={"attention": "mha", "d_model": 32, "num_heads": 4}, repeat_of=0)], 0
    )
    spec = repeats.ask("repeat")
    assert "repeat_of" in repeats.study.trials[spec.number].user_attrs and not repeats.stops(spec.number, grace, 0.0)


@pytest.mark.parametrize(
    ("rule", "flops", "stops"),
    [("median", 500.0, True), ("dominated", 500.0, False), ("dominated", 1000.0, True), ("dominated", 2000.0, True)],
    ids=["median-cheaper", "dominated-cheaper", "dominated-as-costly", "dominated-costlier"],
)
def test_the_dominated_rule_keeps_a_worse_but_cheaper_trial_that_the_median_rule_stops(
    tmp_path: Path, rule: str, flops: float, stops: bool
) -> None:
    """A trial worse than its family's trial in view (0.9 at 1000 FLOPs): the median rule stops it at any cost;
    the dominated rule only when it is no cheaper."""
    ledger = make_ledger(tmp_path, [], 9, preset=replace(PRESET, search=replace(PRESET.search, stopping_rule=rule)))
    grace = PRESET.grace_steps
    numbers = [ledger.ask(f"ray-{i}").number for i in range(PRESET.decision_lag + 1)]
    for number, value in zip(numbers[:3], (0.9, 0.5, 0.8), strict=True):  # MHA, the authors' configuration, DAMCHA (cross)
        ledger.record_report(number, {"step": grace, "val_accuracy": value})
        ledger.finish(number, report(PRESET.train.steps, final=True) | {"val_accuracy": value}, None)
    mha_later = [ledger.ask(f"ray-{i}").number for i in range(3)][-1]  # its view holds trial 0
    assert ledger.stopping.flops[mha_later] > 0  # its analytic FLOPs, known from its ask
    ledger.stopping.flops[mha_later] = flops
    assert ledger.stops(mha_later, grace, 0.1) is stops


@pytest.mark.parametrize("where", ["suggest", "set_user_attr"])
def test_a_ctrl_c_while_asking_fails_the_asked_trial_instead_of_leaving_it_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Ctrl-C reaches the driver between any two lines: a trial the store holds as RUNNING
    is failed (and queued again) by ``interrupt`` however far its ask had got."""
    ledger = make_ledger(tmp_path, [], 2)

    def ctrl_c(*args, **kwargs):  # noqa: ANN002, ANN003, ARG001 (the signal, as Python raises it)
        raise KeyboardInterrupt

    target = SearchSpace if where == "suggest" else optuna.Trial
    monkeypatch.setattr(target, where, ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        ledger.ask("ray-0")
    monkeypatch.undo()
    ledger.interrupt()
    trials = ledger.study.get_trials()
    assert trials and not [t for t in trials if t.state == TrialState.RUNNING]
    assert queued(ledger.study)  # its retry


@pytest.mark.parametrize(
    ("ending", "where", "state"),
    [
        ("complete", "before its ending is stored", TrialState.FAIL),
        ("complete", "while Optuna is told", TrialState.COMPLETE),
        ("complete", "after Optuna was told", TrialState.COMPLETE),
        ("dead worker", "after its retry was queued", TrialState.FAIL),
    ],
)
def test_a_ctrl_c_while_a_trial_ends_leaves_it_failed_or_finished_and_its_configuration_queued_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str, where: str, state: TrialState
) -> None:
    """A Ctrl-C during ``finish`` or the tell that follows: before the ending is stored, ``interrupt``
    fails the trial and queues it again; once stored, the ending stands (told once); a retry
    ``finish`` queued is not queued twice."""
    (tmp_path / "store").mkdir()
    ledger = make_ledger(tmp_path / "store", [], 1)  # one trial: its ending is told as soon as it is stored
    number = ledger.ask("ray-0").number
    tell = optuna.Study.tell

    def ctrl_c(*args, **kwargs):  # noqa: ANN002, ANN003 (the signal, as Python raises it)
        if where == "after Optuna was told":
            tell(*args, **kwargs)
        raise KeyboardInterrupt

    if where in ("before its ending is stored", "after its retry was queued"):
        monkeypatch.setattr(Ending, "attribute", ctrl_c)
    else:
        monkeypatch.setattr(optuna.Study, "tell", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        if ending == "complete":
            ledger.finish(number, report(60, final=True), None)
        else:
            ledger.finish(number, report(20), "ray.exceptions.ActorDiedError: died", ActorDiedError())
    monkeypatch.undo()
    ledger.interrupt()
    assert ledger.study.get_trials()[number].state == state and not ledger.held.open
    assert [PlannedTrial.of(t).retry_of for t in queued(ledger.study)] == ([] if state == TrialState.COMPLETE else [number])


def _run_in_order(tmp_path: Path, newest_first: bool) -> list[tuple]:
    """A whole search through the ledger with two trials at a time, each trial's value a function of its
    knobs alone; the running trial that ends first is the oldest, or the newest."""
    from studies.engine.sampler import sampler_for

    ledger = make_ledger(tmp_path, [], 12, sampler=sampler_for(2, 12, seed=0))  # the product's sampler, seeded
    running: list[int] = []
    while not ledger.done():
        while len(running) < 2 and (config := ledger.ask(f"ray-{len(ledger.study.get_trials())}")) is not None:
            running.append(config.number)
        number = running.pop(-1 if newest_first else 0)
        params = ledger.held.open[number].params
        value = (
            0.5 + 0.001 * params.get("d_model", 0) + 10 * params.get("learning_rate", 3e-4) + 0.01 * params.get("num_heads", 0)
        )
        ledger.record_report(number, {"step": PRESET.grace_steps, "val_accuracy": value})
        if ledger.stops(number, PRESET.grace_steps, value):
            ledger.finish(number, report(PRESET.grace_steps) | {"val_accuracy": value}, None)
        else:
            ledger.finish(number, report(PRESET.train.steps, final=True) | {"val_accuracy": value}, None)
    return [(t.number, t.params, t.state, t.values) for t in ledger.study.get_trials()]


def test_the_sampler_and_early_stopping_decide_the_same_whatever_order_trials_end_in(tmp_path: Path) -> None:
    """The ledger's views depend on trial numbers alone (``Preset.decision_lag``), not on which trial ended first."""
    (tmp_path / "oldest").mkdir()
    (tmp_path / "newest").mkdir()
    oldest_first = _run_in_order(tmp_path / "oldest", newest_first=False)
    newest_first = _run_in_order(tmp_path / "newest", newest_first=True)
    assert len(oldest_first) == 12 and {state for _, _, state, _ in oldest_first} == {TrialState.COMPLETE, TrialState.PRUNED}
    assert oldest_first == newest_first


def test_fix_values_are_read_as_their_knobs_read_them_and_name_the_same_study() -> None:
    """``--fix classifier_causal=true`` (or True, 1) is the boolean True, and ``num_layers=6.0`` is 6: one study."""
    from studies.catalogue.store_names import run_store_name
    from studies.engine.options import read_fix

    spellings = [{"classifier_causal": spelt} for spelt in ("true", "True", 1, True)]
    read = [read_fix(LRA_SHARING, PRESET, fix) for fix in spellings]
    assert read == [{"classifier_causal": True}] * 4 and all(type(r["classifier_causal"]) is bool for r in read)
    assert read_fix(LRA_SHARING, PRESET, {"num_layers": 6.0}) == {"num_layers": 6}
    assert len({run_store_name(LRA_SHARING.store_name(PRESET.name), fix) for fix in read}) == 1


def _ended_process() -> int:
    """The pid of a process of this host that has exited (and been reaped)."""
    import subprocess

    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _running_trial(ledger: Ledger, driver: str) -> int:
    """A trial another driver is running (as that driver records it), by its number."""
    trial = ledger.study.ask()
    trial.set_user_attr("driver", driver)
    trial.set_user_attr("family", "MHA")
    return trial.number


def test_a_trial_whose_driver_provably_stopped_is_failed_and_retried_at_once_the_others_wait(tmp_path: Path) -> None:
    """The class of drivers that are provably gone (killed, crashed: their process on this host has exited),
    against live ones and ones elsewhere, whose trials only Optuna's heartbeat grace can judge."""
    import socket
    import subprocess

    from studies.engine.queue import trial_id
    from studies.engine.recovery import fail_abandoned

    ledger = make_ledger(tmp_path, [], 0)
    alive = subprocess.Popen(["sleep", "60"])
    try:
        host = socket.gethostname()
        gone = _running_trial(ledger, f"{host}:{_ended_process()}")
        live = _running_trial(ledger, f"{host}:{alive.pid}")
        elsewhere = _running_trial(ledger, "another-host:1")
        for number in (gone, live, elsewhere):  # alive by their heartbeat, as a driver records it at a trial's start
            ledger.storage.record_heartbeat(trial_id(ledger.storage, ledger.study, number))
        assert fail_abandoned(ledger.study, ledger.storage) == 1
    finally:
        alive.kill()
    states = {t.number: t.state for t in ledger.study.get_trials()}
    assert states[gone] == TrialState.FAIL and states[live] == states[elsewhere] == TrialState.RUNNING
    assert "driver's process has exited" in ledger.study.trials[gone].user_attrs["error"]
    assert [t.user_attrs["retry_of"] for t in queued(ledger.study)] == [gone]


def test_a_running_driver_fails_another_s_abandoned_trial_and_runs_its_retry(tmp_path: Path) -> None:
    """Not only at its start: at each heartbeat, and the retry is this run's to take."""
    import socket

    ledger = make_ledger(tmp_path, [], 1)
    ledger.store = replace(ledger.store, exclusive=False)  # as on PostgreSQL, beside other drivers
    first = ledger.ask("ray-0")
    gone = _running_trial(ledger, f"{socket.gethostname()}:{_ended_process()}")  # another driver, killed meanwhile
    ledger.heartbeat()
    retry = ledger.ask("ray-1")
    assert retry is not None and ledger.study.trials[retry.number].user_attrs["retry_of"] == gone
    for config in (first, retry):
        ledger.finish(config.number, report(60, final=True), None)
    assert ledger.done() and not ledger.study.get_trials(states=(TrialState.RUNNING,))


def test_a_trial_carries_its_driver_and_heartbeat_from_its_ask(tmp_path: Path) -> None:
    """What recovery judges a trial by is written right after the ask, before the trial is dispatched."""
    from studies.engine.recovery import driver_identity

    ledger = make_ledger(tmp_path, [], 1)
    trial, _ = ledger._sample()  # the ask, before _start dispatches it
    stored = ledger.study.trials[trial.number]
    assert stored.state == TrialState.RUNNING and stored.user_attrs["driver"] == driver_identity()
    assert ledger.held.trial_ids[trial.number] == trial_id(ledger.storage, ledger.study, trial.number)


def test_a_trial_whose_driver_died_right_after_the_ask_is_failed_and_retried_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver killed between Optuna's ask and its first write leaves a RUNNING trial with no driver and no
    heartbeat, which no heartbeat can make stale: its age does, so a resumed run is not blocked by it."""
    import subprocess
    import sys

    from studies.engine import recovery

    ledger = make_ledger(tmp_path, [], 2)
    ledger.store = replace(ledger.store, exclusive=False)  # as on PostgreSQL, beside other drivers
    subprocess.run(  # a real driver process: it asks, then dies before writing anything (as by SIGKILL)
        [
            sys.executable,
            "-c",
            f"import optuna, os; optuna.load_study(study_name={ledger.study.study_name!r}, "
            f"storage='sqlite:///{tmp_path / 'store.db'}').ask(); os._exit(0)",
        ],
        check=True,
    )
    (orphan,) = ledger.study.get_trials(states=(TrialState.RUNNING,))
    assert "driver" not in orphan.user_attrs
    assert recovery.fail_abandoned(ledger.study, ledger.storage) == 0  # within the grace: it may still be written
    monkeypatch.setattr(recovery, "GRACE_PERIOD_S", -1)  # the grace has passed
    ledger.heartbeat()  # a running driver's heartbeat fails it, and queues its retry for this run
    assert ledger.study.trials[orphan.number].state == TrialState.FAIL
    assert "stopped right after asking it" in ledger.study.trials[orphan.number].user_attrs["error"]
    configs = [ledger.ask(f"ray-{index}") for index in range(2)]  # the retry first, then the budget's other trial
    assert all(configs) and ledger.ask("ray-2") is None  # the orphan was one of the budget's 2: its retry replaces it
    assert ledger.study.trials[configs[0].number].user_attrs["retry_of"] == orphan.number
    for config in configs:
        ledger.finish(config.number, report(60, final=True), None)
    assert ledger.done() and not ledger.study.get_trials(states=(TrialState.RUNNING,))


def test_a_trial_another_driver_ended_is_given_up_cleanly(tmp_path: Path) -> None:
    """A driver paused past the heartbeat grace (SIGSTOP, a lost network): another failed its trial as stale.
    On resuming it neither crashes (UpdateFinishedTrialError) nor leaves a trial RUNNING: it stops the training."""
    ledger = make_ledger(tmp_path, [], 1)
    config = ledger.ask("ray-0")
    number = config.number
    ledger.study.tell(number, state=TrialState.FAIL)  # what the other driver's stale-trial check does
    ledger.record_report(number, report(20))
    assert ledger.stops(number, 40, 1.0)  # its worker is stopped at its next report
    ledger.heartbeat()
    ledger.finish(number, report(40), None)
    assert ledger.study.trials[number].state == TrialState.FAIL and ledger.done()


def test_what_ray_tune_pickles_of_a_ledger_holds_neither_its_study_nor_its_store(tmp_path: Path) -> None:
    """Tune pickles the searcher and so its ledger into its experiment files: a study there would carry the
    store's URL (a password with it) and its sampler, whose FLOPs cache once made the pickling fail."""
    from ray import cloudpickle

    ledger = make_ledger(tmp_path, [], 3)
    numbers = [ledger.ask(f"ray-{i}").number for i in range(2)]
    ledger.finish(numbers[0], report(PRESET.train.steps, final=True), None)
    pickled = cloudpickle.dumps(ledger)
    assert str(tmp_path / "store.db").encode() not in pickled  # the store's URL appears nowhere
    restored = cloudpickle.loads(pickled)
    assert not hasattr(restored, "study") and not hasattr(restored, "search") and not hasattr(restored.stopping, "study")
