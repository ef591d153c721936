"""Seed repeats in two looks: the first settles what it decides at its own, stricter level; only the rest go on."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from studies.catalogue import LRA_SHARING
from studies.engine.repeats import INTERIM_ALPHA, open_comparisons
from studies.results.configurations import configurations
from studies.results.verdict import headline
from tests.studies.results.test_analysis import KNOBS, frame


def _rows(shifts: dict[str, tuple[float, float]], seeds: int = 3) -> list[tuple]:
    """MHA and one family per entry of ``shifts`` (its shift from MHA and its seed-to-seed spread), each a search
    run and ``seeds`` fresh-seed repeats on the same seeds as MHA's (each family at a metric rank of its own: one
    configuration each)."""
    rng = np.random.default_rng(11)
    baseline = 0.30 + rng.normal(0, 0.002, seeds)
    rows = [("MHA", 0, 0.30, 100), *(("MHA", 0, float(a), 100) for a in baseline)]
    for rank, (family, (shift, spread)) in enumerate(shifts.items(), start=1):
        values = baseline + shift + rng.normal(0, spread, seeds)
        rows += [(family, rank, 0.31, 100), *((family, rank, float(a), 100) for a in values)]
    return rows


def test_a_first_look_settles_only_the_comparisons_it_decides_at_its_own_level() -> None:
    rows = frame(
        _rows(
            {
                "clear": (+0.10, 0.002),  # ten points ahead, a fifth of a point of noise: decided at once
                "noisy": (+0.005, 0.05),  # half a point apart in five points of noise: open
                "likely": (+0.02, 0.002),  # significant at 0.05, not at the first look's level: open
            }
        )
    )
    comparisons = {c.family: c for c in headline(rows, configurations(rows, KNOBS)).comparisons}
    assert comparisons["clear"].adjusted_p < INTERIM_ALPHA
    assert INTERIM_ALPHA < comparisons["likely"].adjusted_p < 0.05
    still_open = open_comparisons(rows)
    for family in ("noisy", "likely"):
        assert set(comparisons[family].pairing.numbers) <= set(still_open)
    assert comparisons["clear"].pairing.candidate not in still_open
    mha = comparisons["clear"].pairing.baseline
    assert mha in still_open  # the baseline goes on: open comparisons still face it


def test_nothing_goes_on_once_every_comparison_is_settled() -> None:
    rows = frame(_rows({"clear": (+0.10, 0.002), "behind": (-0.10, 0.002)}))
    assert open_comparisons(rows) == []


def test_a_preset_repeats_in_two_looks_only_when_its_first_is_short_of_the_seeds() -> None:
    quick = LRA_SHARING.preset("quick")
    assert quick.repeat_looks(6) == (6,)  # the default: every repeat at once
    two_looks = replace(quick, interim_seeds=3)
    assert two_looks.repeat_looks(6) == (3, 6)
    assert two_looks.repeat_looks(3) == (3,)  # --repeat-seeds 3: one look
    assert two_looks.repeat_looks(0) == ()


def test_a_run_queueing_many_seed_repeats_says_how_far_it_got(smoke_run: dict, tmp_path, monkeypatch) -> None:
    """Each repeat is a write to the store: queueing thousands takes minutes, said as it goes."""
    import optuna

    import studies.engine.repeats as repeats
    from tests.conftest import SMOKE_STUDY, copy_store

    url = copy_store(smoke_run["url"], tmp_path / "store.db")
    monkeypatch.setattr(repeats, "QUEUED_SAID_EVERY", 2)
    said: list[tuple[int, int]] = []
    study = optuna.load_study(study_name=SMOKE_STUDY, storage=url)
    queued = repeats.plan_repeats(study, 6, progress=lambda done, due: said.append((done, due)))
    assert queued > 4 and said == [(done, queued) for done in range(2, queued, 2)]
    assert repeats.plan_repeats(study, 6, progress=lambda done, due: said.append((done, due))) == 0  # all queued


def test_a_first_look_s_phase_expects_the_second_look_s_repeats_at_most(smoke_run: dict, tmp_path) -> None:
    """cross_head's quick run: its ETA during the first look's 60 repeats left out the second look's 48 (-35% at 56% of
    the run); the first look's phase now counts the most the second can queue, every comparison still open."""
    import optuna

    from studies.engine.repeats import later_looks_repeats, plan_repeats
    from tests.conftest import SMOKE_STUDY, copy_store

    study = optuna.load_study(study_name=SMOKE_STUDY, storage=copy_store(smoke_run["url"], tmp_path / "store.db"))
    looks = (4, 6)
    first = plan_repeats(study, looks[0])  # the smoke run repeated 2 seeds: seeds 3 and 4 of each configuration
    assert first > 0 and first % 2 == 0
    assert later_looks_repeats(study, looks, 0) == first  # seeds 5 and 6 of every configuration: the most
    assert later_looks_repeats(study, looks, 1) == 0  # nothing after the last look
    assert later_looks_repeats(study, (looks[0],), 0) == 0  # one look
