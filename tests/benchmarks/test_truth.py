"""The truth table: its file round trip, its truth, and studies replayed on a slice of the committed table."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from filelock import FileLock

import benchmarks.truth.replay as replay_module
from benchmarks.resolution import wilson_interval
from benchmarks.truth.__main__ import main as truth_main
from benchmarks.truth.build import import_rows
from benchmarks.truth.build import main as build_main
from benchmarks.truth.compare import SCHEME, main, run_replays
from benchmarks.truth.crossfit import OutOfSample, cross_fitted_verdict, out_of_sample, seed_sets, split_configurations
from benchmarks.truth.picks import NOT_MATCHED, baseline_of, best_baseline, picks, report
from benchmarks.truth.replay import Strategy, replay
from benchmarks.truth.replays_file import ReplaysBusyError, replays_path, table_version
from benchmarks.truth.scoring import (
    agreement,
    area_under,
    configuration_of,
    hours_to,
    hypervolume,
    same_answer,
    same_conclusion,
)
from benchmarks.truth.seed_roles import SeedPool, judging_roles, replay_preset, seed_pool
from benchmarks.truth.skill import (
    ABSTAIN,
    NO_SEARCH,
    Referee,
    abstaining_fields,
    no_search_verdict,
    recipe_of,
    skill,
    skill_interval,
)
from benchmarks.truth.stability import seed_strata, stability, with_seeds
from benchmarks.truth.strategies import STRATEGIES, protocol_of
from benchmarks.truth.summaries import paired, summary
from benchmarks.truth.table import (
    CURVE_PREFIX,
    TABLE_PRESET,
    Table,
    TableError,
    load,
    provenance_of,
    rows_of,
    table_path,
    write,
)
from benchmarks.truth.truth import configurations, knob_effects, point_truths, true_fronts, true_verdict
from storage import record
from studies.catalogue import LRA_SHARING, STUDIES
from studies.catalogue.schema import choices
from studies.catalogue.search_strategy import NSGA2_WITH_ASHA, Search
from studies.engine.family_sampler import family_configurations
from studies.engine.study_space import preset_space
from studies.engine.trial_config import configuration_flops
from tests.studies.test_exhaustive import TABLE, table_ledger, train_all

COMMITTED = table_path(LRA_SHARING.store_name("table"))
# A slice every pass of the committed table covers first: D=32, two heads (MHA at both learning
# rates, the authors' configuration, and each DAMCHA family's 16 configurations).
SLICE = {"d_model": 32, "num_heads": 2}
DEFAULT = "random untried in the cost band, ASHA per family"  # the quick preset's search, replayed at several budgets


def sliced(table: Table) -> Table:
    """The committed table's rows in ``SLICE``, each configuration with as many seeds as the slice's fewest."""
    rows = table.rows[(table.rows["d_model"] == SLICE["d_model"]) & (table.rows["num_heads"] == SLICE["num_heads"])]
    keys = rows[["family", "point", *table.knobs]].map(repr).agg("|".join, axis=1)
    seeds = int(rows.groupby(keys)["seed_index"].nunique().min())
    return Table(rows[rows["seed_index"] < seeds].reset_index(drop=True), table.provenance)


def slice_study_and_preset(trials: int = 9):
    """lra_sharing narrowed to ``SLICE``, and its quick preset there with ``trials`` search trials."""
    quick = LRA_SHARING.preset("quick")
    domains = dict(quick.domains) | choices(d_model=(SLICE["d_model"],), num_heads=(SLICE["num_heads"],))
    preset = replace(quick, domains=domains, trials=trials)
    return replace(LRA_SHARING, presets={"quick": preset}), preset


@pytest.fixture(scope="module")
def committed() -> Table:
    return sliced(load(COMMITTED))


def test_a_table_survives_its_file_and_a_store_is_rebuilt_from_it(tmp_path: Path) -> None:
    ledger = table_ledger(tmp_path)
    train_all(ledger)
    ledger.study.set_user_attr("search_space", {name: "" for name in ledger.space.searched})
    rows = rows_of(ledger.study)
    path = tmp_path / "table.csv"
    write(rows, provenance_of(ledger.study, rows, "the command"), path)
    table = load(path)
    assert len(table.rows) == len(rows) == 24 and table.curve_steps == TABLE.train.report_steps()
    assert table.rows["d_model"].tolist() == rows["d_model"].tolist()  # 32, not 32.0
    assert table.rows["metric_rank"].map(type).map(lambda kind: kind.__name__).isin({"int", "str", "NoneType"}).all()
    assert table.rows["baseline"].tolist() == rows["baseline"].tolist()
    study = optuna.create_study(directions=["maximize", "minimize"], study_name="rebuilt")
    study.set_user_attr("search_space", ledger.study.user_attrs["search_space"])
    definition = replace(LRA_SHARING, presets={"table": replace(TABLE, name="table")})
    assert import_rows(study, definition, table) == 24
    assert import_rows(study, definition, table) == 0  # a row the store holds is not added twice
    rebuilt = rows_of(study)
    pd.testing.assert_frame_equal(rebuilt, rows, check_dtype=False)  # the time it first finished too


def test_export_reads_the_store_beside_a_running_build_which_a_second_build_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A running build holds the SQLite store's one writer's lock: ``--export`` beside it reads the store (it
    once died with a StoreBusyError traceback), and a second build is refused in one sentence, exit 2."""
    ledger = table_ledger(tmp_path)
    train_all(ledger)
    ledger.study.set_user_attr("search_space", {name: "" for name in ledger.space.searched})
    rows = rows_of(ledger.study)
    write(rows, provenance_of(ledger.study, rows, "the command"), tmp_path / "table.csv")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    stored = optuna.create_study(study_name=LRA_SHARING.store_name("table"), storage=url, directions=["maximize", "minimize"])
    stored.set_user_attr("search_space", ledger.study.user_attrs["search_space"])
    import_rows(stored, replace(LRA_SHARING, presets={"table": replace(TABLE, name="table")}), load(tmp_path / "table.csv"))
    monkeypatch.setattr("benchmarks.truth.table.TABLES_DIR", tmp_path)  # never the committed tables
    exported = tmp_path / f"{LRA_SHARING.store_name('table')}.csv"
    holder = subprocess.Popen(  # a build's driver: it holds the store's lock until killed
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / "store.db")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert build_main(["--storage", url, "--export"]) == 0
        assert len(load(exported).rows) == 24
        with pytest.raises(SystemExit) as exited:
            build_main(["--storage", url])
        assert exited.value.code == 2 and "another driver is running a study" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()


HOLD_LOCK = """
import sys, time
from pathlib import Path
from storage.database_lock import database_lock
with database_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_file_that_is_not_a_table_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(TableError, match="cannot read the table"):  # no provenance beside it
        load(path)
    path.with_suffix(".json").write_text('{"knobs": ["d_model"]}')
    with pytest.raises(TableError, match="other.csv is not a truth table: it has no column family"):
        load(path)


def test_a_row_cut_short_or_out_of_range_is_refused_by_its_line(
    committed: Table, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "slice.csv"
    write(committed.rows, committed.provenance, path)
    *lines, last = path.read_text().splitlines()
    path.write_text("\n".join([*lines, ",".join(last.split(",")[:16])]) + "\n")  # the last row stops after its curve's start
    with pytest.raises(TableError, match=rf"slice.csv, line {len(committed.rows) + 1}: no '.*' \(a row cut short"):
        load(path)
    assert truth_main(["--table", str(path), "--resamples", "0"]) == 2  # refused, no NaN printed as a result
    assert "a row cut short" in capsys.readouterr().err
    broken = committed.rows.copy()
    broken.loc[3, record.TEST_ACCURACY] = 1.5
    write(broken, committed.provenance, path)
    with pytest.raises(TableError, match="line 5: test_accuracy = 1.5 lies outside"):
        load(path)


@pytest.mark.parametrize(
    ("command", "argv", "words"),
    [
        ("compare", ["--replays", "0"], "--replays must be 1 to 100000"),
        ("compare", ["--replays", "-5"], "--replays must be 1 to 100000"),
        ("compare", ["--replays", str(10**12)], "--replays must be 1 to 100000"),
        ("compare", ["--seeds", f"0-{10**12}"], "--seeds must span at most 100000 study seeds"),
        ("compare", ["--seeds", "599-300"], "'599-300' is not FIRST-LAST"),
        ("compare", ["--seeds", "300"], "'300' is not FIRST-LAST"),
        ("compare", ["--seeds", "0-9", "--replays", "10"], "--seeds and --replays both choose"),
        ("compare", ["--against-trials", "24"], "--against-trials sets the budget of the --against strategy"),
        ("compare", ["--horizon", "nan"], "--horizon must be a positive"),
        ("compare", ["--workers", "0"], "--workers must be 1 or more"),
        ("compare", ["--repeat-seeds", "0"], "--repeat-seeds must be 1 or more"),
        ("truth", ["--resamples", "-1"], "--resamples must be 0 or more"),
        ("truth", ["--study", "recall_heads"], "has no table preset; studies with one: lra_sharing, cross_head"),
        ("compare", ["--study", "lm_rank"], "has no table preset; studies with one: lra_sharing, cross_head"),
        ("build", ["--study", "recall_heads"], "has no table preset; studies with one: lra_sharing, cross_head"),
        ("build", ["--study", "lra_sharin"], "did you mean 'lra_sharing'"),
    ],
)
def test_the_referee_s_commands_check_their_arguments_before_any_work(
    command: str, argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = {"compare": main, "truth": truth_main, "build": build_main}[command]
    with pytest.raises(SystemExit) as exited:
        entry(argv)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert words in error and "usage: python -m benchmarks.truth" in error


def test_a_study_s_committed_table_is_read_by_naming_the_study(capsys: pytest.CaptureFixture[str]) -> None:
    assert truth_main(["--study", "cross_head", "--resamples", "0"]) == 0
    assert capsys.readouterr().out.startswith("cross_head-table-v6.csv: ")


def test_the_committed_table_holds_what_its_columns_say(committed: Table) -> None:
    table = load(COMMITTED)
    assert table.provenance["study"] == "lra_sharing-table-v6" and table.provenance["packages"]["torch"]
    assert table.knobs == list(LRA_SHARING.space.searched)
    steps = table.curve_steps
    assert steps == LRA_SHARING.preset("table").train.report_steps()
    rows = table.rows
    assert (rows[record.ACCURACY] == rows[f"{CURVE_PREFIX}{steps[-1]}"]).all()  # the last evaluation is the final value
    assert rows[[record.ACCURACY, record.TEST_ACCURACY]].stack().between(0, 1).all()
    assert (rows["seed"] == 80_000 + rows["seed_index"]).all()
    assert not rows.duplicated(["family", "point", *table.knobs, "seed_index"]).any()
    assert len(committed.rows) >= 35  # the slice: 2 MHA, the authors' configuration, 16 of each DAMCHA family


def test_the_truth_of_the_slice_compares_every_family_at_matched_cost(committed: Table) -> None:
    configs = configurations(committed)
    assert len(configs) == 35 and (configs["seeds"] == configs["seeds"].iloc[0]).all()
    fronts = true_fronts(configs)
    assert set(fronts["family"]) == {"MHA", "DAMCHA (paper)", "DAMCHA (cross)"}
    headline = true_verdict(committed)
    assert [comparison.family for comparison in headline.comparisons] == [
        "DAMCHA (paper)",
        "DAMCHA (cross)",
        "authors' configuration",
    ]
    effects = {(e.family, e.knob): e for e in knob_effects(configs, committed.knobs)}
    assert effects[("DAMCHA (cross)", "generator_depth")].pairs == 8  # 16 configurations, paired by depth
    assert effects[("MHA", "learning_rate")].pairs == 1


def test_seeds_are_resampled_together_within_the_seeds_the_same_configurations_have(committed: Table) -> None:
    doubled = with_seeds(committed, [2, 2])
    assert sorted(doubled.rows["seed_index"].unique()) == [0, 1]
    for index in (0, 1):  # both copies are seed 2's rows
        copy = doubled.rows[doubled.rows["seed_index"] == index]
        pd.testing.assert_series_equal(
            copy[record.TEST_ACCURACY].reset_index(drop=True),
            committed.rows.loc[committed.rows["seed_index"] == 2, record.TEST_ACCURACY].reset_index(drop=True),
        )
    mha = committed.rows[(committed.rows["family"] == "MHA")]
    deeper = pd.concat([committed.rows, *(mha.assign(seed_index=index) for index in (3, 4))], ignore_index=True)
    assert seed_strata(Table(deeper, committed.provenance)) == [[0, 1, 2], [3, 4]]


def test_the_truth_s_stability_counts_the_resamples_that_change_a_comparison(committed: Table) -> None:
    entries = stability(committed, resamples=4)
    truth = true_verdict(committed)
    assert [entry.comparison.family for entry in entries] == [c.family for c in truth.comparisons]
    for entry in entries:
        assert entry.leave_one_out.resamples == 3 and entry.bootstrap.resamples == 4
        for changes in (entry.leave_one_out, entry.bootstrap):
            assert all(0 <= share <= 1 for share in (changes.pick, changes.sign, changes.significance))
        assert 0 < entry.power < 1 and entry.seeds_needed >= 2 and entry.deviation > 0
    # one seed left out by hand: the first leave-one-out resample
    alone = true_verdict(with_seeds(committed, [1, 2])).comparisons
    first = entries[0]
    flipped = math.copysign(1, alone[0].difference) != math.copysign(1, first.comparison.difference)
    assert first.leave_one_out.sign >= flipped / 3


def test_a_replayed_study_runs_the_engine_s_rules_on_the_table(committed: Table) -> None:
    definition, preset = slice_study_and_preset()
    preset = replay_preset(preset, committed)
    first = replay(definition, preset, committed, Strategy("today", NSGA2_WITH_ASHA), seed=0)
    again = replay(definition, preset, committed, Strategy("today", NSGA2_WITH_ASHA), seed=0)
    pd.testing.assert_frame_equal(first.frame, again.frame)  # the same study from the same seed
    search = first.frame[first.frame["repeat_of"].isna()]
    assert search["family"].tolist() == ["MHA", "DAMCHA (paper)", "DAMCHA (cross)"] * 3  # families in turn
    assert search.iloc[1]["point"] == "authors' configuration"
    by_configuration: dict[tuple, set[float]] = {}
    for row in committed.rows.to_dict("records"):
        by_configuration.setdefault(configuration_of(row["family"], row, committed.knobs), set()).add(row[record.ACCURACY])
    complete = search[search["state"] == "COMPLETE"]
    assert len(complete)
    for _, trial in complete.iterrows():  # each value is one of its configuration's seeds in the table
        assert trial[record.ACCURACY] in by_configuration[configuration_of(trial["family"], trial, committed.knobs)]
    shares = [share for _, share in first.hypervolume]
    assert shares == sorted(shares) and 0 < shares[-1] <= 1
    assert first.device_hours[0] > 0
    scored = agreement(true_verdict(committed), first.headline, configurations(committed), committed.knobs)
    assert set(scored.per_label) == set(scored.concludes) == {"DAMCHA (paper)", "DAMCHA (cross)", "authors' configuration"}


def deeper(table: Table, seeds: range, where: pd.Series) -> Table:
    """``table`` with judging seeds ``seeds`` for the rows ``where`` selects: copies of seed ``i % 3``'s rows,
    each value moved by a distinct hundredth of a point so that a replayed value names its seed."""
    copies = [
        table.rows[where & (table.rows["seed_index"] == index % 3)].assign(
            seed_index=index, **{record.ACCURACY: lambda rows, i=index: rows[record.ACCURACY] + 1e-4 * i}
        )
        for index in seeds
    ]
    return Table(pd.concat([table.rows, *copies], ignore_index=True), table.provenance)


def test_a_replayed_trial_takes_the_time_its_configuration_took_on_the_seeds_every_one_has(committed: Table) -> None:
    """Deciding seeds trained in other sittings (here 100 times slower) do not move a configuration's time."""
    rows = committed.rows
    table = deeper(committed, range(3, 9), rows["learning_rate"] == 1e-3)
    table.rows.loc[table.rows["seed_index"] >= 3, "wall_seconds"] *= 100
    outcomes = replay_module._Outcomes(table, judging_roles(table, 6, 0))
    for key, seeds in outcomes.rows.items():
        assert outcomes.wall[key] == pytest.approx(np.median([seeds[index]["wall_seconds"] for index in (0, 1, 2)]))


def test_a_replay_draws_fresh_judging_seeds_and_never_judges_on_or_searches_twice_a_seed(committed: Table) -> None:
    definition, preset = slice_study_and_preset()
    table = deeper(committed, range(3, 9), committed.rows["learning_rate"] == 1e-3)
    pool = seed_pool(table, preset.repeat_seeds)
    assert pool == SeedPool(common=(0, 1, 2), deciding=tuple(range(9)), repeats=6, keep=2)
    assert replay_preset(preset, table).repeat_seeds == 6  # as many as the preset's
    seed_of: dict[tuple, dict[float, int]] = {}
    for row in table.rows.to_dict("records"):
        seed_of.setdefault(configuration_of(row["family"], row, table.knobs), {})[row[record.ACCURACY]] = int(row["seed_index"])
    drawn, fallbacks = set(), 0
    for study_seed in range(4):
        replayed = replay(definition, replay_preset(preset, table), table, Strategy("today", NSGA2_WITH_ASHA), study_seed)
        judging = judging_roles(table, 6, study_seed).judging
        assert replayed.judging == judging and len(set(judging)) == 6 and len(set(judging) & {0, 1, 2}) <= 1
        drawn.add(frozenset(judging))
        frame = replayed.frame[replayed.frame["state"] == "COMPLETE"]  # a final value names its seed
        read: dict[tuple, list[int]] = {}
        for _, trial in frame[frame["repeat_of"].isna()].iterrows():
            key = configuration_of(trial["family"], trial, table.knobs)
            read.setdefault(key, []).append(seed_of[key][trial[record.ACCURACY]])
        assert all(len(seeds) == len(set(seeds)) for seeds in read.values())  # no configuration reads a seed twice
        assert replayed.reused_search_seeds == 0
        assert not set().union(*map(set, read.values())) & set(judging)  # no search trial reads a judging seed
        repeats = frame[frame["repeat_of"].notna()]
        assert len(repeats)
        for _, trial in repeats.iterrows():
            key = configuration_of(trial["family"], trial, table.knobs)
            seed, index = seed_of[key][trial[record.ACCURACY]], int(trial["repeat_index"])
            if len(seed_of[key]) > 3:  # a configuration with judging seeds: repeat k reads the k-th
                assert seed == judging[index - 1]
            else:  # without: first the seeds its search did not read
                assert seed not in read.get(key, []) or replayed.leaked_repeats
        fallbacks += replayed.fallback_repeats
    assert len(drawn) > 1  # the judging seeds vary from study to study
    assert fallbacks > 0  # the test could fail: a configuration without judging seeds was judged
    plain = seed_pool(committed, 6)  # a table without judging seeds: one seed left to search, two to judge
    assert plain == SeedPool(common=(0, 1, 2), deciding=(0, 1, 2), repeats=2, keep=1)


def test_the_cross_fitted_truth_selects_on_the_seeds_all_have_and_judges_only_on_the_others(committed: Table) -> None:
    table = deeper(committed, range(3, 9), committed.rows["learning_rate"] == 1e-3)
    assert seed_sets(table) == ((0, 1, 2), tuple(range(3, 9)))
    with pytest.raises(ValueError, match="judgement share seeds"):
        split_configurations(configurations(table), [0, 1], [1, 2])
    with pytest.raises(TableError, match="more seeds for some"):
        seed_sets(committed)  # every configuration has the same seeds: nothing is out of sample
    crossed = cross_fitted_verdict(table)
    on_selection_seeds = true_verdict(with_seeds(table, [0, 1, 2])).comparisons  # picks by validation over 0-2
    for comparison, selected in zip(crossed.comparisons, on_selection_seeds, strict=True):
        for side in ("candidate", "baseline"):
            ours, theirs = getattr(comparison, side), getattr(selected, side)
            assert [repr(ours[k]) for k in committed.knobs] == [repr(theirs[k]) for k in committed.knobs]
            if ours is not None and len(ours["fresh"]):  # judged on the judging seeds alone (repeat index = seed + 1)
                assert set(ours["fresh"]) <= {seed + 1 for seed in range(3, 9)}
    gaps = out_of_sample(table)
    assert set(gaps) <= {c.family for c in crossed.comparisons} and gaps
    for gap in gaps.values():
        assert gap.folds >= 3 and gap.picks >= 1 and gap.interval[0] <= gap.gap <= gap.interval[1]


def test_a_replay_is_right_when_it_decides_as_the_truth_and_is_wrong_nowhere_and_abstaining_earns_nothing(
    committed: Table,
) -> None:
    referee = Referee.of(judged(committed))

    class Answers(Referee):  # the truth decides one comparison and leaves one open, its out-of-sample gap -1.5
        @property
        def answers(self) -> dict[str, str]:
            return {"decided": "worse", "open": "undetermined"}

    gap = OutOfSample("open", -1.5, (-2.5, -0.5), 9, 4)
    scored = Answers(referee.truth, {"open": gap}, margin=1.0)

    def score(decided: str, open_answer: str, low: float = -3.0, high: float = 0.5) -> dict[str, object]:
        fields = {"answer: decided": decided, "answer: open": open_answer, "low: open": low, "high: open": high}
        return scored.score(fields)

    assert score("worse", "undetermined")["right"] and score("worse", "worse")["right"]
    assert score("worse", "undetermined")["covers: open"] and not score("worse", "undetermined", -1.0, 0.5)["covers: open"]
    assert not score("undetermined", "undetermined")["right"]  # abstaining where the truth decides
    for wrongly in ("better", "same"):  # against the gap's sign; the same within 1 point of a 1.5-point gap
        assert score("worse", wrongly)["wrong: open"] and not score("worse", wrongly)["right"]
    abstained = scored.score(abstaining_fields(scored))
    assert not abstained["right"] and not abstained["covers: open"] and not abstained["decides: decided"]


def test_no_search_judges_a_random_in_band_pick_per_family_at_the_recipe_on_the_replays_judging_seeds(
    committed: Table,
) -> None:
    rows = committed.rows
    table = deeper(committed, range(3, 9), (rows["learning_rate"] == 1e-3) | (rows["attention"] == "mha"))  # as committed
    configs, referee = configurations(table), Referee.of(table)
    reference = float(referee.truth.comparisons[0].baseline[record.FLOPS])
    _, preset = slice_study_and_preset()
    recipe = recipe_of(preset, table.knobs)
    assert recipe == {"learning_rate": 1e-3}  # the quick preset's TrainConfig
    picked = set()
    for seed in range(6):
        judging = {index + 1 for index in judging_roles(table, 6, seed).judging}  # a repeat's index is its seed + 1
        headline = no_search_verdict(table, configs, reference, 6, seed, recipe)
        assert headline.comparisons
        for comparison in headline.comparisons:
            candidate, baseline = comparison.candidate, comparison.baseline
            assert set(candidate["fresh"]) == set(baseline["fresh"]) == judging  # the replays' seeds of that study seed
            assert 1 / 1.15 <= candidate[record.FLOPS] / baseline[record.FLOPS] <= 1.15
            assert baseline["learning_rate"] == 1e-3  # handed the recipe's learning rate, never searched
            assert candidate["learning_rate"] == (3e-4 if candidate["family"] == "authors' configuration" else 1e-3)
            picked.add(configuration_of(candidate["family"], candidate, table.knobs))
    assert len(picked) > len(headline.comparisons)  # drawn at random: other picks from other study seeds


def test_a_named_point_is_scored_against_the_truth_of_the_variant_the_replay_trained(committed: Table) -> None:
    variants = point_truths(committed)
    assert len(variants) == 1  # the slice's one width and head count
    (key, comparison), truth = next(iter(variants.items())), true_verdict(committed)
    assert key[0] == "authors' configuration" and comparison.family == key[0]
    definition, preset = slice_study_and_preset()
    replayed = replay(definition, replay_preset(preset, committed), committed, Strategy("today", NSGA2_WITH_ASHA), 0)
    wrong = {key: replace(comparison, adjusted_p=0.5 if comparison.significant else 0.001)}  # a truth of the other answer
    got = next(c for c in replayed.headline.comparisons if c.family == key[0])
    scored = agreement(truth, replayed.headline, configurations(committed), committed.knobs, wrong)
    assert scored.concludes[key[0]] == (got.significant != comparison.significant)


def test_a_replay_concludes_alike_when_only_an_insignificant_difference_changes_sign(committed: Table) -> None:
    truth = true_verdict(committed).comparisons[0]
    flipped = replace(truth, candidate_value=truth.baseline_value, baseline_value=truth.candidate_value)
    for significant in (False, True):
        expected = replace(truth, adjusted_p=0.001 if significant else 0.5)
        got = replace(flipped, adjusted_p=expected.adjusted_p)
        assert same_answer(expected, expected) and same_conclusion(expected, expected)
        assert not same_answer(expected, got)  # strict: the sign is part of the answer
        assert same_conclusion(expected, got) is not significant  # the sign of a difference not told from zero is not
        assert not same_conclusion(expected, replace(expected, adjusted_p=0.5 if significant else 0.001))


def test_a_search_stopping_the_dominated_replays_alike_and_stops_only_searched_trials_a_cheaper_one_dominates(
    committed: Table,
) -> None:
    definition, preset = slice_study_and_preset(trials=12)  # 4 a family: MHA's 2 configurations in the slice, twice over
    preset = replay_preset(preset, committed)
    default = Strategy("dominated", Search(stopping_rule="dominated"))
    first = replay(definition, preset, committed, default, seed=3)
    pd.testing.assert_frame_equal(first.frame, replay(definition, preset, committed, default, seed=3).frame)
    frame = first.frame
    stopped = frame[frame["state"] == "PRUNED"]
    assert len(stopped), "the test could fail: the dominated rule stops a trial here"
    assert (stopped["pruned_at_step"] == preset.grace_steps).all()  # the quick preset's one rung
    assert stopped["repeat_of"].isna().all() and stopped["point"].isna().all()  # seed repeats and named points never stop
    for _, trial in stopped.iterrows():  # dominated: never the cheapest of its family's trials before it
        earlier = frame[(frame["family"] == trial["family"]) & (frame["number"] < trial["number"])]
        assert (earlier["flops_per_example"] <= trial["flops_per_example"]).any()
    tried = _configurations_tried(frame, "MHA", committed.knobs)
    assert len(set(tried[:2])) == 2  # untried first: MHA's two configurations before either again


def test_hypervolume_and_its_curve() -> None:
    reference = (0.0, 10.0)
    assert hypervolume([], reference) == 0
    assert hypervolume([(0.5, 5.0)], reference) == pytest.approx(2.5)
    assert hypervolume([(0.5, 5.0), (0.4, 6.0), (0.8, 8.0)], reference) == pytest.approx(2.5 + 0.3 * 2)  # (0.4, 6) dominated
    curve = [(1.0, 0.5), (2.0, 0.96)]
    assert hours_to(curve, 0.95) == 2.0 and math.isinf(hours_to(curve, 0.99))
    assert area_under(curve, 4.0) == pytest.approx((1 * 0 + 1 * 0.5 + 2 * 0.96) / 4)


def _configurations_tried(frame: pd.DataFrame, family: str, knobs: list[str]) -> list[tuple]:
    search = frame[frame["repeat_of"].isna() & (frame["family"] == family) & frame["point"].isna()]
    return [configuration_of(family, row, knobs) for row in search.to_dict("records")]


def test_untried_sampling_searches_a_family_smaller_than_its_budget_whole(committed: Table) -> None:
    definition, preset = slice_study_and_preset(trials=12)  # 4 a family: MHA's 2 configurations in the slice, twice over
    preset = replay_preset(preset, committed)
    untried = Strategy("untried", Search("random", per_family=False, untried=True, stopping_rule="none", in_band=False))
    plain = Strategy("plain", Search("random", per_family=False, untried=False, stopping_rule="none", in_band=False))
    repeated_without = 0
    for seed in range(4):
        for family, sizes in (("MHA", 2), ("DAMCHA (cross)", 4)):
            tried = _configurations_tried(replay(definition, preset, committed, untried, seed).frame, family, committed.knobs)
            assert len(set(tried[:sizes])) == sizes, (seed, family, tried)  # no configuration twice while one is left
        tried = _configurations_tried(replay(definition, preset, committed, plain, seed).frame, "DAMCHA (cross)", committed.knobs)
        repeated_without += len(set(tried)) < len(tried)
    assert repeated_without  # the test could fail: plain random search repeats configurations here


def judged(committed: Table) -> Table:
    """The slice with judging seeds 3-8 for its configurations at learning rate 1e-3, as the committed table has them."""
    return deeper(committed, range(3, 9), committed.rows["learning_rate"] == 1e-3)


def _slice_file(committed: Table, tmp_path: Path) -> tuple:
    """The slice's study and preset, and the slice with judging seeds written to ``tmp_path/slice.csv`` (its replays
    beside it)."""
    definition, preset = slice_study_and_preset()
    path = tmp_path / "slice.csv"
    table = judged(committed)
    write(table.rows, table.provenance, path)
    return definition, preset, path


def of(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """``frame``'s rows of strategy ``name``."""
    return frame[frame["strategy"] == name].reset_index(drop=True)


def test_replays_are_kept_and_redone_only_for_a_table_that_changed(committed: Table, tmp_path: Path) -> None:
    definition, preset, path = _slice_file(committed, tmp_path)
    name = "random untried, no early stopping"
    first = run_replays(path, [name], 2, definition, preset)
    assert first["strategy"].tolist() == [name] * 2 + [NO_SEARCH] * 2 + [ABSTAIN] * 2  # the references beside it
    assert of(first, name)["seed"].tolist() == [0, 1] and of(first, name)["right"].map(type).eq(bool).all()
    assert not of(first, ABSTAIN)["right"].any()  # abstaining earns nothing where the truth decides
    rows = summary(first, 1.0).set_index("strategy")
    share = of(first, name)["right"].mean()
    low, high = wilson_interval(share, 2)
    assert rows.loc[name, "replays"] == 2 and rows.loc[name, "right"] == f"{share:.1%} [{low:.1%}, {high:.1%}]"
    kept = pd.read_csv(replays_path(path))
    again = run_replays(path, [name], 3, definition, preset)  # one more: the two kept are not replayed
    assert of(again, name)["seed"].tolist() == [0, 1, 2]
    assert of(again, name)["replay_seconds"].tolist()[:2] == of(kept, name)["replay_seconds"].tolist()
    larger = run_replays(path, [name], 1, definition, replace(preset, trials=12))  # another budget: kept apart
    assert larger["trials"].tolist() == [12] * 3 and len(pd.read_csv(replays_path(path))) == 12
    searchless = [NO_SEARCH, ABSTAIN]  # the references' rows of seed 0 copied from the budget of 9 trials, not replayed
    at_9 = again[again["strategy"].isin(searchless) & again["seed"].eq(0)].drop(columns="trials").reset_index(drop=True)
    at_12 = larger[larger["strategy"].isin(searchless)].drop(columns="trials").reset_index(drop=True)
    pd.testing.assert_frame_equal(at_12, at_9, check_dtype=False)
    assert first["repeat_seeds"].iloc[0] > 1
    fewer = run_replays(path, [name], 1, definition, replace(preset, repeat_seeds=1))  # fewer repeats: kept apart too
    assert fewer["repeat_seeds"].tolist() == [1] * 3 and len(pd.read_csv(replays_path(path))) == 15
    table = load(path)
    changed = table.rows.copy()
    changed.loc[0, "wall_seconds"] += 1.0
    write(changed, table.provenance, path)  # the table changed: its replays are redone
    redone = run_replays(path, [name], 1, definition, preset)
    assert len(pd.read_csv(replays_path(path))) == 3 and redone["table"].iloc[0] != kept["table"].iloc[0]
    stale = pd.read_csv(replays_path(path)).assign(scheme="an earlier scheme")
    stale.to_csv(replays_path(path), index=False)  # rows of an earlier scheme of seeds and scores: redone too
    assert run_replays(path, [name], 1, definition, preset)["scheme"].eq(SCHEME).all()


def test_a_second_run_into_the_same_replays_file_is_refused_and_loses_nothing(
    committed: Table, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    definition, preset, path = _slice_file(committed, tmp_path)
    name = "random untried, no early stopping"
    run_replays(path, [name], 1, definition, preset)
    kept = replays_path(path).read_bytes()
    with FileLock(f"{replays_path(path)}.lock"):  # as a run replaying into the file holds it
        with pytest.raises(ReplaysBusyError, match="another run is replaying into .*slice-replays.csv"):
            run_replays(path, [name], 2, definition, preset)
        assert main(["--table", str(path), "--replays", "2", "--only", name]) == 2
    assert "error: another run is replaying into" in capsys.readouterr().err
    assert replays_path(path).read_bytes() == kept
    assert of(run_replays(path, [name], 2, definition, preset), name)["seed"].tolist() == [0, 1]  # released, it runs


def _committed_copy(tmp_path: Path) -> Path:
    """A copy of the committed table, its provenance and its replays in ``tmp_path``: what ``main`` reads and may write."""
    for source in (COMMITTED, COMMITTED.with_suffix(".json"), replays_path(COMMITTED)):
        (tmp_path / source.name).write_bytes(source.read_bytes())
    return tmp_path / COMMITTED.name


def test_a_range_of_study_seeds_is_replayed_and_summarized_alone(
    committed: Table, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    definition, preset, path = _slice_file(committed, tmp_path)
    name = "random untried, no early stopping"
    run_replays(path, [name], 2, definition, preset)  # seeds 0-1 kept
    assert of(run_replays(path, [name], 2, definition, preset, first_seed=5), name)["seed"].tolist() == [0, 1, 5, 6]
    assert sorted(of(pd.read_csv(replays_path(path)), name)["seed"]) == [0, 1, 5, 6]  # seeds 0-1 not replayed again
    copy = _committed_copy(tmp_path)  # the command: the seeds asked for alone, of those kept, none replayed
    kept = replays_path(copy).read_bytes()
    argv = ["--table", str(copy), "--trials", "24", "--seeds", "200-201", "--only", DEFAULT]
    assert main([*argv, "--workers", "1"]) == 0
    assert re.search(r"^replays(\s+2){3}$", capsys.readouterr().out, re.MULTILINE)  # it and the two references
    assert replays_path(copy).read_bytes() == kept


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "not a replays file"),
        (b"strategy,trials\nA,2", "no column repeat_seeds, seed, table"),
        (b"strategy,trials,repeat_seeds,seed,table\nA,24,6,0,t\nA,24,6,inf,t\n", "line 3: seed = inf is not a whole"),
        (b"strategy,trials,repeat_seeds,seed,table\nA,24,6,1.5,t\n", "line 2: seed = 1.5"),
        (b"strategy,trials,repeat_seeds,seed,table,regret: x\nA,24,6,0,t,inf\n", "line 2: regret: x is not finite"),
        (b'strategy,trials,repeat_seeds,seed,table,hypervolume\nA,24,6,0,t,"[[1, 0.5], [2"\n', "line 2: hypervolume is no"),
        (b"strategy,trials,repeat_seeds,seed,table\n\xff\xfe,24,6,0,t\n", "not a replays file"),
        (b'strategy,trials,repeat_seeds,seed,table\n"A,24,6,0,t\n', "not a replays file"),
    ],
)
def test_a_replays_file_that_is_not_one_is_refused_by_its_line_and_kept(
    content: bytes, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = _committed_copy(tmp_path)
    replays_path(copy).write_bytes(content)
    assert main(["--table", str(copy), "--replays", "1", "--only", DEFAULT, "--workers", "1"]) == 2
    error = capsys.readouterr().err
    assert says in error and "restore it with git checkout, or delete it" in error
    assert replays_path(copy).read_bytes() == content  # nothing replayed over it


def test_a_budget_larger_than_the_table_is_refused_before_any_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = _committed_copy(tmp_path)
    kept = replays_path(copy).read_bytes()
    assert main(["--table", str(copy), "--trials", str(10**9), "--only", DEFAULT, "--workers", "1"]) == 2
    rows = len(load(copy).rows)
    assert f"more than lra_sharing-table-v6.csv has rows ({rows})" in capsys.readouterr().err
    assert replays_path(copy).read_bytes() == kept


def test_a_table_mid_build_is_refused_in_a_sentence_that_says_to_finish_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A build trains the deciding seeds pass by pass: one configuration a seed ahead of the rest is the only one
    with the most seeds, and the 43 other deciding ones hold neither those nor the common seeds alone. Refused
    before the first replay, which would have rewritten the replays file for a table it then refuses."""
    copy = _committed_copy(tmp_path)
    rows = pd.read_csv(copy)
    ahead = rows[(rows["family"] != "MHA") & (rows["seed_index"] == rows["seed_index"].max())].iloc[[0]]
    pd.concat([rows, ahead.assign(seed_index=ahead["seed_index"] + 1)]).to_csv(copy, index=False)
    kept = replays_path(copy).read_bytes()
    assert main(["--table", str(copy), "--replays", "1", "--only", DEFAULT, "--workers", "1"]) == 2
    error = capsys.readouterr().err
    assert "43 of its 140 configurations have 9 seeds" in error and "finish it" in error  # a sentence, exit 2
    assert replays_path(copy).read_bytes() == kept  # refused before a replay: the replays of the whole table are kept


def test_a_strategy_of_another_budget_is_paired_seed_by_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = _committed_copy(tmp_path)
    kept = replays_path(copy).read_bytes()
    argv = ["--table", str(copy), "--seeds", "0-49", "--trials", "32", "--only", DEFAULT, "--workers", "1"]
    assert main([*argv, "--against", DEFAULT, "--against-trials", "24", "--markdown"]) == 0
    rows = pd.read_csv(replays_path(copy))
    right = {  # the committed rows of each budget: the default search at 32 trials and at 24
        trials: rows[(rows["strategy"] == DEFAULT) & (rows["trials"] == trials) & (rows["seed"] < 50)].set_index("seed")["right"]
        for trials in (32, 24)
    }
    only_32, only_24 = int((right[32] & ~right[24]).sum()), int((~right[32] & right[24]).sum())
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {DEFAULT} "))
    assert f"| {only_32} / {only_24} " in line and "|      50 |" in line
    assert replays_path(copy).read_bytes() == kept  # nothing replayed: the rows were there


def test_strategies_are_compared_replay_by_replay_of_the_same_study_seed(committed: Table, tmp_path: Path) -> None:
    definition, preset = slice_study_and_preset()
    path = tmp_path / "slice.csv"
    table = judged(committed)
    write(table.rows, table.provenance, path)
    names = ["random untried, no early stopping", "today: NSGA-II, ASHA per family"]
    frame = run_replays(path, names, 4, definition, preset)
    families = [family.label for family in definition.families]
    compared = paired(frame, names[1], 1.0, families).set_index("strategy")
    assert list(compared.index) == [names[0], NO_SEARCH, ABSTAIN]
    row = compared.loc[names[0]]
    mine, theirs = (frame[frame["strategy"] == name].set_index("seed") for name in names)
    only, only_there = int((mine["right"] & ~theirs["right"]).sum()), int((theirs["right"] & ~mine["right"]).sum())
    assert row["seeds"] == 4 and row["right: only here / only there"] == f"{only} / {only_there}"
    difference = (mine["regret: DAMCHA (cross)"] - theirs["regret: DAMCHA (cross)"]).mean()
    assert row["regret: DAMCHA (cross), mean difference"] == round(difference, 2)
    tests = [column for column in row.index if column.endswith(" p") and pd.notna(row[column])]
    assert len(tests) == 3  # being right, two families' regrets: Holm's correction spans them and the references' tests
    for column in tests:
        assert row[column] <= row[column.replace(" p", " p (Holm)")] <= 1
    with pytest.raises(ValueError, match="no replays of 'random, no early stopping'"):
        paired(frame, "random, no early stopping", 1.0, families)


def test_replays_in_parallel_workers_give_the_figures_of_one_process(committed: Table, tmp_path: Path) -> None:
    definition, preset = slice_study_and_preset()
    names = ["random untried, no early stopping", "today: NSGA-II, ASHA per family"]
    table, frames = judged(committed), []
    for workers in (1, 2):
        path = tmp_path / f"workers-{workers}" / "slice.csv"
        path.parent.mkdir()
        write(table.rows, table.provenance, path)
        frames.append(
            run_replays(path, names, 3, definition, preset, workers=workers).drop(columns=["replay_seconds", "sampler_hours"])
        )
    assert frames[0]["strategy"].tolist() == [name for name in (*names, NO_SEARCH, ABSTAIN) for _ in range(3)]
    assert frames[0]["seed"].tolist() == [0, 1, 2] * 4
    pd.testing.assert_frame_equal(frames[0], frames[1])


def test_the_costs_a_search_in_the_band_draws_by_are_the_flops_the_table_s_trials_recorded() -> None:
    table = load(COMMITTED)
    preset = LRA_SHARING.preset("quick")
    space = preset_space(LRA_SHARING, preset)
    cost = configuration_flops(preset, space, {})
    searched = table.rows[table.rows["point"].isna()]
    recorded = {
        configuration_of(row["family"], row, table.knobs): float(row[record.FLOPS]) for row in searched.to_dict("records")
    }
    compared = 0
    for family, configs in family_configurations(LRA_SHARING, space).items():
        for config in configs:
            assert cost(config) == pytest.approx(recorded[configuration_of(family, config, table.knobs)], rel=1e-12), config
            compared += 1
    assert compared == len(recorded) == 136  # every searched configuration of the quick space


TABLED = [name for name, study in STUDIES.items() if TABLE_PRESET in study.presets]


@pytest.mark.parametrize("name", TABLED)
def test_every_tabled_study_replays_its_quick_presets_own_protocol(name: str) -> None:
    """A study whose truth table can score its quick preset has a strategy that searches and repeats as that preset
    does: its reliability is measured on the protocol a run executes, not a neighbour's."""
    quick = STUDIES[name].preset("quick")
    assert STRATEGIES[protocol_of(quick)].preset(quick) == quick
    with pytest.raises(ValueError, match="0 strategies"):
        protocol_of(replace(quick, interim_seeds=5))  # a protocol no strategy replays


def test_picks_counts_each_comparisons_baseline_and_answer_as_each_replays_verdict_reads_them() -> None:
    """``benchmarks.truth.picks`` tells what replayed studies compared: for each, its best baseline once, and every
    comparison's baseline configuration (flagged where not matched in cost) with the answer given against it."""
    definition = STUDIES["cross_head"]
    quick = definition.preset("quick")
    table = load(table_path(definition.store_name("table")))
    preset, strategy = replay_preset(quick, table), protocol_of(quick)
    counted = picks(definition, preset, table, strategy, range(3))
    headlines = [replay(definition, preset, table, STRATEGIES[strategy], seed).headline for seed in range(3)]
    assert counted.best == Counter(best_baseline(headline, table.knobs) for headline in headlines)
    assert "" not in counted.best and sum(counted.best.values()) == 3  # every study compared something with its best MHA
    for headline in headlines:
        for comparison in headline.comparisons:
            assert counted.compared[comparison.family][baseline_of(comparison, table.knobs), comparison.answer] >= 1
            assert comparison.pairing.matched != baseline_of(comparison, table.knobs).endswith(NOT_MATCHED)
    assert all(sum(answers.values()) == 3 for answers in counted.compared.values())  # each comparison once a study
    truths = best_baseline(cross_fitted_verdict(table), table.knobs)
    lines = report(counted, cross_fitted_verdict(table), table.knobs, 3)
    marked = [line for line in lines[1 : len(counted.best) + 1] if line.startswith("  * ")]
    assert [line.endswith(truths) for line in marked] == ([True] if truths in counted.best else [])
    assert "Talking-Heads (the truth: same against d_model=64 num_heads=2 learning_rate=0.001)" in "\n".join(lines)


@pytest.mark.parametrize("name", [name for name in TABLED if STUDIES[name].preset("quick").reliability is not None])
def test_a_quick_presets_recorded_reliability_recomputes_from_its_committed_replays(name: str) -> None:
    quick = STUDIES[name].preset("quick")
    measured, strategy = quick.reliability, protocol_of(quick)
    committed = table_path(STUDIES[name].store_name("table"))
    replays = pd.read_csv(replays_path(committed))
    kept = replays[
        (replays["trials"] == measured.trials)
        & (replays["repeat_seeds"] == quick.repeat_seeds)
        & (replays["table"] == table_version(committed))
        & (replays["scheme"] == SCHEME)
    ]
    right = {who: kept[kept["strategy"] == who].set_index("seed")["right"].astype(bool) for who in (strategy, NO_SEARCH)}
    assert len(right[strategy]) == measured.replays and right[strategy].index.equals(right[NO_SEARCH].index)
    share = float(right[strategy].mean())
    assert measured.right == pytest.approx((share, *wilson_interval(share, measured.replays)), abs=5e-4)
    assert measured.no_search == pytest.approx(float(right[NO_SEARCH].mean()), abs=5e-4)
    mine, theirs = right[strategy].to_numpy(), right[NO_SEARCH].to_numpy()
    assert measured.skill == pytest.approx((skill(mine.mean(), theirs.mean()), *skill_interval(mine, theirs)), abs=5e-3)
    # every open comparison the sentence names, with the replays' own shares of it
    ours = kept[kept["strategy"] == strategy]
    compared = [column.removeprefix("covers: ") for column in ours.columns if column.startswith("covers: ")]
    shares = {
        label: tuple(int(f"{ours[f'{what}: {label}'].astype(bool).mean():.0%}"[:-1]) for what in ("decides", "wrong", "covers"))
        for label in compared
    }
    said = re.findall(r"decides it in (\d+)% of replays, wrongly in (\d+)%, .*? in (\d+)%", measured.cannot_tell)
    assert said and all(tuple(map(int, figures)) in shares.values() for figures in said), (said, shares)


def test_seed_repeats_in_two_looks_continue_exactly_the_comparisons_the_first_left_open(committed: Table) -> None:
    """The sequential rule as a run executes it (the engine's looks, replayed on the committed table): every compared
    configuration gets the first look's seeds; seeds past them go only to configurations of comparisons that the
    verdict over the first look's seeds leaves open at ``INTERIM_ALPHA``."""
    from studies.engine.repeats import open_comparisons

    definition, preset = slice_study_and_preset()
    table = deeper(committed, range(3, 9), committed.rows["seed_index"] >= 0)  # 9 seeds for every configuration
    judged_cross = (table.rows["family"] == "DAMCHA (cross)") & (table.rows["seed_index"] >= 3)
    table.rows.loc[judged_cross, record.TEST_ACCURACY] -= 0.10  # ten points behind on fresh seeds: settled at the first look
    preset = replay_preset(preset, table)
    strategy = STRATEGIES["repeats in two looks: random untried in the band, ASHA per family"]
    interim, seeds = strategy.interim_seeds, preset.repeat_seeds
    seen = {"settled": 0, "continued": 0}
    for study_seed in range(6):
        played = replay(definition, preset, table, strategy, seed=study_seed)
        frame = played.frame
        repeats = frame[frame["repeat_index"].notna()]
        first = frame[frame["repeat_index"].isna() | (frame["repeat_index"] <= interim)].copy()
        first.attrs = dict(frame.attrs)
        still_open = set(open_comparisons(first))
        counts = repeats.groupby("repeat_of")["repeat_index"].max()
        continued = set(counts[counts > interim].index)
        assert continued <= still_open, study_seed  # seeds beyond the first look only where it left a comparison open
        assert set(counts.unique()) <= {interim, seeds}  # a configuration stops at a look, never between
        seen["settled"] += int((counts == interim).sum())
        seen["continued"] += len(continued)
    assert seen["settled"] and seen["continued"]  # the six studies saw both


def test_the_agreement_curve_has_a_point_per_strategy_and_budget_from_the_committed_replays(tmp_path: Path) -> None:
    """docs/truth.md's figure: each strategy at each budget its share concluding alike, Wilson interval, median hours;
    replays of another table state or another count of repeat seeds left out; a bad file refused in a sentence."""
    import pandas as pd

    from benchmarks.truth.curve import curve_info, main, reference_share

    row = dict(strategy="A", trials=12, repeat_seeds=6, table="t1", right=True, search_hours=1.0, sampler_hours=0.0, seed=0)
    replays = pd.DataFrame(
        [row | {"repeat_hours": 0.5}, row | {"right": False, "repeat_hours": 1.5}, row | {"trials": 24, "repeat_hours": 1.0}]
        + [row | {"table": "t0"}, row | {"repeat_seeds": 3}, row | {"strategy": "B"}]
        + [
            row | {"strategy": NO_SEARCH, "seed": seed, "trials": trials, "right": seed == 0}
            for seed in (0, 1)
            for trials in (12, 24)
        ]
    )
    assert reference_share(replays, "t1", 6) == 0.5  # each study seed once, whatever budgets it was replayed beside
    assert curve_info(replays, "t1", 6)["strategy"].tolist() == ["A", "A", "B"]  # the references are no points
    points = curve_info(replays, "t1", 6, only=["A"])
    assert points[["strategy", "trials", "replays", "right", "hours"]].values.tolist() == [
        ["A", 12, 2, 0.5, 2.0],
        ["A", 24, 1, 1.0, 2.0],
    ]
    assert points.loc[0, "low"] < 0.5 < points.loc[0, "high"] and (
        points.loc[0, "low"],
        points.loc[0, "high"],
    ) == wilson_interval(0.5, 2)
    page = tmp_path / "curve.html"
    assert main(["--output", str(page), "--only", "cost band"]) == 0  # the committed replays
    assert "random untried in the cost band, ASHA per family" in page.read_text()
    broken = tmp_path / "table.csv"
    broken.write_text("not a table")
    replays_file = tmp_path / "table-replays.csv"
    replays_file.write_text("strategy,seed\nA,0\n")
    assert main(["--table", str(broken), "--output", str(page)]) == 2
