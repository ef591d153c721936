"""Seed repeats are grouped by configuration; the verdict compares at matched cost, on fresh seeds and
test data, answers every family, and corrects for several comparisons (Holm)."""

from __future__ import annotations

import numpy as np
import optuna
import pandas as pd
import pytest
from scipy import stats

from studies.results.configurations import configurations
from studies.results.frame import trials_frame
from studies.results.fronts import best, pareto_mask
from studies.results.matching import COST_BAND, front_relation, pairings
from studies.results.names import FAMILIES_ATTRIBUTE, QUALITY_ATTRIBUTE, TASK_ATTRIBUTE
from studies.results.quality import QUALITIES
from studies.results.statistics import (
    detectable_difference,
    holm,
    mean_interval,
    paired_power,
    seeds_for_power,
    welch_test,
)
from studies.results.verdict import duplicates, headline

KNOBS = ["attention", "metric_rank"]


def frame(rows: list[tuple], families: list[str] | None = None) -> pd.DataFrame:
    """Rows of (family, metric_rank, value, flops[, state[, point]]); the MHA rows are the baseline's.

    A configuration's first row is its search run (its value on validation); the next ones are its
    fresh-seed repeats 1, 2, ... (their value on the test split).
    """
    first: dict[tuple[str, int], int] = {}
    records = []
    for number, (family, rank, value, flops, *rest) in enumerate(rows):
        state = rest[0] if rest else "COMPLETE"
        point = rest[1] if len(rest) > 1 else None
        original = first.setdefault((family, rank), number)
        index = sum(r["repeat_of"] == original for r in records) + 1 if original != number else None
        records.append(
            {
                "number": number,
                "state": state,
                "attention": "mha" if family == "MHA" else "damcha",
                "family": family,
                "metric_rank": rank,
                "baseline": family == "MHA",
                "val_accuracy": value,
                "test_accuracy": value if index is not None else value - 0.01,  # search runs' own test values differ
                "score": value,
                "repeat_of": None if index is None else original,
                "repeat_index": index,
                "flops_per_example": flops,
                "parameters": 10,
                "examples_per_s": 50.0,
                "point": point,
            }
        )
    result = pd.DataFrame(records)
    result.attrs[FAMILIES_ATTRIBUTE] = families or list(dict.fromkeys(["MHA", *result["family"]]))
    result.attrs["knobs"] = KNOBS
    return result


def answer(rows: pd.DataFrame):
    return headline(rows, configurations(rows, KNOBS))


def test_a_configuration_s_headline_figure_is_its_fresh_seed_test_mean_with_an_interval() -> None:
    configs = configurations(
        frame([("MHA", 0, 0.30, 100), ("MHA", 0, 0.32, 100), ("MHA", 0, 0.34, 100), ("D", 4, 0.40, 90)]), KNOBS
    )
    mha = configs[configs["baseline"]].iloc[0]
    assert mha["seeds"] == 2 and mha["judged_on"] == "test" and np.isclose(mha["mean"], 0.33)
    assert mha["search_value"] == 0.30 and mha["number"] == 0  # the search run is apart from the headline
    assert np.isclose(mha["ci_high"] - 0.33, stats.t.ppf(0.975, 1) * np.std([0.32, 0.34], ddof=1) / np.sqrt(2))
    searched_only = configs[~configs["baseline"]].iloc[0]
    assert searched_only["seeds"] == 0 and np.isnan(searched_only["mean"])  # no fresh seeds: no headline figure


def test_an_accuracy_s_interval_never_leaves_0_to_100_percent() -> None:
    """Two seeds on 64 test examples (smoke): 17.2% [-42.4%, 76.7%] was shown; the mean cannot be below 0."""
    configs = configurations(frame([("MHA", 0, 0.2, 100), ("MHA", 0, 0.047, 100), ("MHA", 0, 0.297, 100)]), KNOBS)
    mha = configs.iloc[0]
    t_low = 0.172 - stats.t.ppf(0.975, 1) * np.std([0.047, 0.297], ddof=1) / np.sqrt(2)
    assert t_low < 0 and mha["ci_low"] == 0.0 and 0.172 < mha["ci_high"] <= 1.0
    assert QUALITIES["val_accuracy"].bounded(-0.3, 1.4) == (0.0, 1.0)
    assert np.isnan(QUALITIES["val_accuracy"].bounded(float("nan"), float("nan"))[0])


def test_the_verdict_compares_at_the_best_baseline_s_cost_on_test_data_with_holm_p_values() -> None:
    rows = frame([("MHA", 0, a, 100) for a in (0.30, 0.31, 0.29, 0.30)] + [("D", 4, a, 105) for a in (0.40, 0.415, 0.385, 0.40)])
    result = answer(rows)
    (comparison,) = result.comparisons
    assert comparison.pairing.at_best_baseline and comparison.pairing.matched
    assert "The best D at the best MHA's cost (1.05× its FLOPs) gains 10.0 accuracy points" in result.sentence
    assert "test accuracy over 3 fresh seeds" in result.sentence and "paired t-test, Holm-adjusted p " in result.sentence
    p = stats.ttest_rel([0.415, 0.385, 0.40], [0.31, 0.29, 0.30]).pvalue
    assert np.isclose(comparison.adjusted_p, p) and comparison.significant  # one test: Holm changes nothing

    noisy = frame([("MHA", 0, a, 100) for a in (0.20, 0.40, 0.30)] + [("D", 4, a, 100) for a in (0.45, 0.15, 0.33)])
    assert ": undetermined, neither a difference nor the same within ±1.0 points" in answer(noisy).sentence


@pytest.mark.parametrize(
    ("shift", "spread", "seeds", "expected"),
    [
        (+0.10, 0.01, 3, "better"),  # ten points ahead, seed to seed within a point
        (-0.10, 0.01, 3, "worse"),
        (0.0, 0.003, 6, "same"),  # no difference, a third of a point of seed noise: well inside the ±1-point margin
        (+0.005, 0.05, 3, "undetermined"),  # half a point apart, five points of seed noise
    ],
)
def test_each_comparison_has_one_of_three_answers_better_worse_same_or_undetermined(
    shift: float, spread: float, seeds: int, expected: str
) -> None:
    rng = np.random.default_rng(7)
    baseline = 0.30 + rng.normal(0, 0.002, seeds)
    candidate = baseline + shift + rng.normal(0, spread, seeds)
    rows = frame(
        [("MHA", 0, 0.30, 100), *(("MHA", 0, a, 100) for a in baseline), ("D", 4, 0.31, 100)]
        + [("D", 4, a, 100) for a in candidate]
    )
    result = answer(rows)
    (comparison,) = result.comparisons
    assert comparison.answer == expected
    differences = candidate - baseline
    tost = max(
        stats.ttest_1samp(differences, -0.01, alternative="greater").pvalue,
        stats.ttest_1samp(differences, 0.01, alternative="less").pvalue,
    )
    assert comparison.equivalence_p == pytest.approx(tost)
    if expected == "same":
        assert "the same within ±1.0 points (two one-sided tests, p " in result.sentence
    elif expected == "undetermined":
        assert comparison.seeds_needed is not None and comparison.seeds_needed > seeds
        assert f"about {comparison.seeds_needed} seeds in all would decide it" in result.sentence
    else:
        assert comparison.significant and ": significant)" in result.sentence


def test_the_same_within_the_margin_is_tested_per_comparison_beside_differences_holm_adjusted() -> None:
    """Two families far behind the baseline and one level with it: the level one's "same" is its own two
    one-sided tests (Holm across the three equivalence tests would have tripled its p-value)."""
    rng = np.random.default_rng(3)
    baseline = 0.60 + rng.normal(0, 0.01, 9)
    level = baseline + rng.normal(0, 0.004, 9)
    rows = frame(
        [("MHA", 0, 0.60, 100), *(("MHA", 0, a, 100) for a in baseline)]
        + [("A", 4, 0.5, 100), *(("A", 4, a - 0.06, 100) for a in baseline + rng.normal(0, 0.01, 9))]
        + [("B", 8, 0.5, 100), *(("B", 8, a - 0.05, 100) for a in baseline + rng.normal(0, 0.01, 9))]
        + [("C", 16, 0.6, 100), *(("C", 16, a, 100) for a in level)]
    )
    a, b, c = answer(rows).comparisons
    assert (a.answer, b.answer, c.answer) == ("worse", "worse", "same")
    differences = level - baseline
    tost = max(
        stats.ttest_1samp(differences, -0.01, alternative="greater").pvalue,
        stats.ttest_1samp(differences, 0.01, alternative="less").pvalue,
    )
    assert c.equivalence_p == pytest.approx(tost)
    assert [x.adjusted_p for x in (a, b, c)] == pytest.approx(holm([x.test.p_value for x in (a, b, c)]))


def test_a_named_point_that_is_its_family_s_pick_is_said_once_and_the_data_is_named() -> None:
    """The paper family's best was the authors' configuration: two sentences and two table rows said the same."""
    rows = frame(
        [("MHA", 0, 0.30, 100), ("MHA", 0, 0.30, 100), ("MHA", 0, 0.31, 100), ("MHA", 0, 0.29, 100)]
        + [("D", 4, 0.40, 100, "COMPLETE", "P"), *(("D", 4, a, 100, "COMPLETE", "P") for a in (0.40, 0.41, 0.39))]
    )
    rows["test_count"] = [64] * len(rows)
    rows.attrs[TASK_ATTRIBUTE] = "listops"
    result = answer(rows)
    family, point = result.comparisons  # both comparisons stay: scoring and the store read each
    assert point.pairing.point and duplicates(family, point)
    assert result.sentence.count("trails by") + result.sentence.count("gains") == 1
    assert "The P is D's selected configuration: the comparison above." in result.sentence
    assert "Judged on listops's held-out test split: 64 test predictions a seed (one is 1.6 accuracy points)." in result.sentence


def test_holm_adjusts_across_the_families_compared() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, float("nan")])[0] == 0.5 and np.isnan(holm([0.5, float("nan")])[1])
    rows = frame(
        [("MHA", 0, a, 100) for a in (0.30, 0.30, 0.31, 0.29)]
        + [("A", 4, a, 100) for a in (0.33, 0.33, 0.35, 0.31)]
        + [("B", 8, a, 100) for a in (0.40, 0.39, 0.42, 0.41)]
    )
    comparisons = answer(rows).comparisons
    raw = [c.test.p_value for c in comparisons]
    assert [c.adjusted_p for c in comparisons] == pytest.approx(holm(raw))
    assert all(c.adjusted_p >= r for c, r in zip(comparisons, raw, strict=True))


def test_a_family_without_a_configuration_at_the_baseline_s_cost_is_compared_at_its_own_with_the_baseline_there() -> None:
    rows = frame(
        [("MHA", 0, 0.30, 100), ("MHA", 1, 0.25, 200, "PRUNED"), ("D", 4, 0.50, 210)]
        + [("MHA", 1, a, 200) for a in (0.28, 0.27)]  # the seed repeats train the stopped MHA at D's cost
        + [("D", 4, a, 210) for a in (0.45, 0.47)]
    )
    (pairing,) = pairings(rows, ["MHA", "D"])
    assert (pairing.candidate, pairing.baseline, pairing.at_best_baseline, pairing.matched) == (2, 1, False, True)
    sentence = answer(rows).sentence
    assert f"D has no configuration within ±{round(100 * (COST_BAND - 1))}% of the best MHA's FLOPs" in sentence
    assert "against the best MHA at its own cost (1.05× its FLOPs), gains 18.5 accuracy points" in sentence


def test_no_sentence_compares_across_the_band_without_saying_so() -> None:
    rows = frame([("MHA", 0, 0.30, 100), ("D", 4, 0.60, 300)])
    (pairing,) = pairings(rows, ["MHA", "D"])
    assert not pairing.matched
    assert (
        "D's best has no MHA configuration within ±15% of its FLOPs; against the nearest (3.00× its FLOPs, not matched in cost)"
        in (answer(rows).sentence)
    )


def test_every_family_is_answered_even_one_whose_trials_all_stopped_early() -> None:
    rows = frame([("MHA", 0, 0.30, 100), ("A", 4, 0.20, 100, "PRUNED"), ("A", 8, 0.10, 100, "FAIL")], ["MHA", "A", "B"])
    sentence = answer(rows).sentence
    assert "A: no comparison, none of its 2 search trials completed (1 stopped early, 1 failed)." in sentence
    assert "B: no comparison, B has no search trial." in sentence


def test_a_named_point_is_answered_on_its_own_line() -> None:
    point = "authors' configuration"
    rows = frame(
        [("MHA", 0, 0.30, 100), ("D", 9, 0.20, 95, "COMPLETE", point), ("D", 4, 0.35, 100)]
        + [("MHA", 0, a, 100) for a in (0.30, 0.31)]
        + [("D", 9, a, 95) for a in (0.22, 0.21)]
        + [("D", 4, a, 100) for a in (0.36, 0.33)]
    )
    result = answer(rows)
    assert [c.pairing.label for c in result.comparisons] == ["D", point]
    assert (
        "The authors' configuration, trained as they specify (0.95× the FLOPs of the MHA it is compared with) trails by 9.0"
        in result.sentence
    )


def test_without_fresh_seeds_the_verdict_says_it_is_uncorrected() -> None:
    result = answer(frame([("MHA", 0, 0.30, 100), ("D", 4, 0.35, 100)]))
    assert result.comparisons[0].test is None and "uncorrected for selection and untested" in result.sentence


def test_seeds_that_do_not_vary_establish_nothing() -> None:
    flat = frame([("MHA", 0, a, 100) for a in (0.30, 0.30, 0.40)] + [("D", 4, a, 100) for a in (0.30, 0.29, 0.39)])
    sentence = answer(flat).sentence
    assert "the seeds do not vary, so no test: not established" in sentence and ": significant" not in sentence


def test_the_fronts_relation_says_which_lies_above_or_where_they_cross() -> None:
    above = frame([("MHA", 0, 0.30, 100), ("MHA", 1, 0.40, 200), ("D", 4, 0.35, 100), ("D", 8, 0.45, 200)])
    assert (
        front_relation(above, "D", "MHA") == "D's front lies on or above MHA's over 100–200 FLOPs, the range both searches cover"
    )
    crossing = frame([("MHA", 0, 0.30, 100), ("MHA", 1, 0.50, 200), ("D", 4, 0.35, 100), ("D", 8, 0.45, 200)])
    assert front_relation(crossing, "D", "MHA").startswith("D's and MHA's fronts cross near 200 FLOPs")


def test_t_intervals_cover_the_truth_need_two_values_and_widen_for_few_seeds() -> None:
    rng = np.random.default_rng(1)
    low, high = mean_interval(rng.normal(0.5, 0.05, size=40))
    assert low < 0.5 < high and high - low < 0.05
    assert all(np.isnan(welch_test(np.array([0.1]), np.array([0.2, 0.3])).interval))
    three = np.array([-0.006, -0.056, 0.016])  # three paired differences: mean ± 4.303 · s/√3 (t, 2 degrees of freedom)
    low, high = mean_interval(three)
    assert np.isclose(high - low, 2 * 4.303 * three.std(ddof=1) / np.sqrt(3), rtol=1e-3)
    covered = sum(low < 0.0 < high for low, high in (mean_interval(rng.normal(0.0, 1.0, size=3)) for _ in range(400)))
    assert 0.92 < covered / 400 < 0.98  # 95% with three values, where a percentile bootstrap covers far less
    low, high = welch_test(rng.normal(1.0, 0.1, size=5), rng.normal(0.0, 1.0, size=5)).interval  # unequal spreads
    assert low < 1.0 < high


def in_bits_per_byte(rows: pd.DataFrame) -> pd.DataFrame:
    """The same trials measured in bits per byte, which a study minimises (as ``trials_frame`` gives them)."""
    rows = rows.rename(columns={"val_accuracy": "val_bits_per_byte", "test_accuracy": "test_bits_per_byte"})
    rows["score"] = -rows["val_bits_per_byte"]
    rows.attrs[QUALITY_ATTRIBUTE] = QUALITIES["val_bits_per_byte"]
    return rows


def test_a_minimised_objective_selects_the_lowest_and_leads_when_lower() -> None:
    rows = in_bits_per_byte(
        frame(
            [("MHA", 0, b, 100) for b in (2.10, 2.12, 2.11)]
            + [("D", 4, 3.00, 95)]  # worse (higher): not the best
            + [("D", 8, b, 105) for b in (1.90, 1.95, 1.93)]
        )
    )
    configs = configurations(rows, KNOBS)
    result = headline(rows, configs)
    (comparison,) = result.comparisons
    assert comparison.candidate["metric_rank"] == 8 and np.isclose(comparison.difference, -0.175)
    assert "leads by 0.175 bits per byte (1.940 vs 2.115 test bits per byte over 2 fresh seeds" in result.sentence


def test_pareto_front_and_best_of_a_minimised_objective_keep_the_lowest_values() -> None:
    rows = in_bits_per_byte(frame([("MHA", 0, 2.0, 100), ("MHA", 0, 2.5, 50), ("D", 4, 3.0, 60), ("D", 8, 1.5, 200)]))
    assert best(rows)["val_bits_per_byte"] == 1.5
    assert pareto_mask(rows).tolist() == [True, True, False, True]  # 3.0 at 60 FLOPs: beaten by 2.5 at 50


@pytest.mark.parametrize(("difference", "seeds", "alpha"), [(3.1, 3, 0.05), (3.1, 6, 0.05 / 3), (1.0, 9, 0.05), (-4.9, 4, 0.05)])
def test_a_paired_t_test_s_power_is_what_simulated_studies_find(difference: float, seeds: int, alpha: float) -> None:
    rng = np.random.default_rng(0)
    differences = rng.normal(difference, 1.6, size=(20_000, seeds))  # paired differences, SD 1.6 points
    found = np.mean(stats.ttest_1samp(differences, 0.0, axis=1).pvalue < alpha)
    assert paired_power(difference, 1.6, seeds, alpha) == pytest.approx(found, abs=0.015)


def test_the_seeds_a_power_needs_are_the_fewest_that_reach_it() -> None:
    needed = seeds_for_power(3.1, 1.6, power=0.8)
    assert paired_power(3.1, 1.6, needed) >= 0.8 > paired_power(3.1, 1.6, needed - 1)
    assert seeds_for_power(0.0, 1.6, most=20) == 21  # no difference: no number of seeds finds one
    assert paired_power(30.0, 1.0, 9) == pytest.approx(1.0)  # the far tail underflows in scipy: counted as nothing
    with pytest.raises(ValueError, match="at least 2 seeds"):
        paired_power(1.0, 1.6, 1)


@pytest.mark.parametrize(("seeds", "alpha"), [(6, 0.05), (12, 0.05 / 8), (200, 0.05)])
def test_the_detectable_difference_is_the_gap_found_with_the_power_asked(seeds: int, alpha: float) -> None:
    gap = detectable_difference(1.6, seeds, alpha=alpha)
    assert paired_power(gap, 1.6, seeds, alpha) == pytest.approx(0.8, abs=1e-6)
    assert paired_power(0.95 * gap, 1.6, seeds, alpha) < 0.8
    if seeds == 200:  # many seeds: the normal approximation's (z_(1-alpha/2) + z_0.8) * SD / sqrt(n)
        assert gap == pytest.approx((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * 1.6 / np.sqrt(200), rel=0.01)


def test_every_figure_of_a_comparison_rests_on_the_seeds_its_test_uses() -> None:
    """With unequal seeds (MHA on 4, D on 2) the difference once came from the means over all seeds and the
    interval from the shared two ("trails by 11.7 ... CI -90.1 to +88.6"): now the means, the difference, the
    interval and the count are the paired seeds' alone."""
    rows = frame([("MHA", 0, a, 100) for a in (0.30, 0.30, 0.32, 0.60, 0.62)] + [("D", 4, a, 100) for a in (0.40, 0.41, 0.44)])
    (comparison,) = answer(rows).comparisons
    assert comparison.test.seeds[0] == 2  # repeats 1 and 2 of both
    assert np.isclose(comparison.baseline_value, 0.31) and np.isclose(comparison.candidate_value, 0.425)
    assert np.isclose(comparison.difference, 11.5)  # not 42.5 - 46 over every seed
    low, high = comparison.interval
    assert low < comparison.difference < high


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_the_best_baseline_in_a_band_is_chosen_where_all_its_runs_reached_stopped_early_or_not() -> None:
    """A study's authors' configuration at D=32 was compared with MHA at 3e-4, which finished, because the
    better MHA at 1e-3 had been stopped at step 2000 by its family's median (which the D=64 runs raise)."""
    study = optuna.create_study(direction="maximize")
    study.set_metric_names(["val_accuracy"])
    study.set_user_attr("budget", {"families": {"MHA": {}, "DAMCHA (paper)": {}}})
    distributions = {"d_model": optuna.distributions.CategoricalDistribution((32, 64))}

    def run(d_model: int, curve: dict[int, float], family: str = "MHA", point: str | None = None) -> None:
        state = optuna.trial.TrialState.COMPLETE if max(curve) == 4000 else optuna.trial.TrialState.PRUNED
        attributes = {"family": family, "baseline": family == "MHA", "flops_per_example": 1e6 * d_model}
        study.add_trial(
            optuna.trial.create_trial(
                params={"d_model": d_model},
                distributions=distributions,
                value=curve[4000] if state == optuna.trial.TrialState.COMPLETE else None,
                intermediate_values=curve,
                user_attrs=attributes | ({"point": point} if point else {}),
                state=state,
            )
        )

    run(64, {2000: 0.55, 4000: 0.59})  # the best MHA
    run(32, {2000: 0.50})  # MHA at 1e-3, ahead at step 2000, stopped there by the family's median
    run(32, {2000: 0.46, 4000: 0.51})  # MHA at 3e-4: finished, worse where both have a value
    run(32, {2000: 0.47, 4000: 0.53}, "DAMCHA (paper)", "authors' configuration")
    frame = trials_frame(study)
    assert frame["curve"].iloc[1] == {2000: 0.50}
    point = next(p for p in pairings(frame, ["MHA", "DAMCHA (paper)"]) if p.point)
    assert (point.candidate, point.baseline, point.matched) == (3, 1, True)
