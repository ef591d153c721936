"""Seed repeats are grouped by configuration, and the headline's interval and verdict follow the data."""

from __future__ import annotations

import numpy as np
import pandas as pd

from reports.results.configurations import configurations
from reports.results.fronts import best, pareto_mask
from reports.results.names import QUALITY_ATTRIBUTE
from reports.results.quality import QUALITIES
from reports.results.statistics import difference_interval, mean_interval
from reports.results.verdict import headline


def frame(rows: list[tuple[str, int, float, float]]) -> pd.DataFrame:
    """Rows of (attention, metric_rank, accuracy, flops); baselines are the MHA rows.

    A configuration's first row is its search run; the next ones are its fresh-seed repeats 1, 2, ...
    """
    first: dict[tuple[str, int], int] = {}  # configuration -> its search run's number
    indices, originals = [], []
    for number, (attention, rank, _, _) in enumerate(rows):
        original = first.setdefault((attention, rank), number)
        indices.append(sum(n == original for n in originals) or None)  # repeats so far of this configuration
        originals.append(original)
    return pd.DataFrame(
        [
            {
                "number": i,
                "state": "COMPLETE",
                "attention": a,
                "family": "MHA" if a == "mha" else "DAMCHA",
                "metric_rank": r if a == "damcha" else None,
                "baseline": a == "mha",
                "val_accuracy": acc,
                "score": acc,  # trials_frame: the first objective, larger is better
                "repeat_of": None if index is None else original,
                "repeat_index": index,
                "flops_per_example": flops,
                "parameters": 10,
                "examples_per_s": 50.0,
            }
            for i, ((a, r, acc, flops), index, original) in enumerate(zip(rows, indices, originals, strict=True))
        ]
    )


def test_repeats_of_a_configuration_are_one_row_with_an_interval() -> None:
    configs = configurations(
        frame([("mha", 0, 0.30, 100), ("mha", 0, 0.32, 100), ("damcha", 4, 0.40, 90)]), ["attention", "metric_rank"]
    )
    mha = configs[configs["baseline"]].iloc[0]
    assert mha["seeds"] == 2 and mha["numbers"] == [0, 1] and np.isclose(mha["mean"], 0.31)
    # Two seeds: the t-interval (1 degree of freedom) is 0.31 ± 12.706 · 0.0141 / √2, far wider than the two values.
    assert np.isclose(mha["ci_high"] - 0.31, 12.706 * np.std([0.30, 0.32], ddof=1) / np.sqrt(2)) and mha["ci_low"] < 0.30
    assert np.isnan(configs[~configs["baseline"]].iloc[0]["ci_low"])  # one seed: no interval


def test_headline_is_significant_only_when_the_interval_excludes_zero() -> None:
    clear = frame([("mha", 0, a, 100) for a in (0.30, 0.31, 0.29)] + [("damcha", 4, a, 90) for a in (0.40, 0.415, 0.385)])
    answer = headline(configurations(clear, ["attention", "metric_rank"]))
    assert "gains 10.0 accuracy points" in answer.sentence and ": significant)" in answer.sentence
    assert "paired t-test over 2 fresh seeds both trained on" in answer.sentence
    (comparison,) = answer.comparisons
    assert comparison.family == "DAMCHA" and comparison.method == "paired" and comparison.interval[0] > 0

    noisy = frame([("mha", 0, a, 100) for a in (0.20, 0.40, 0.30)] + [("damcha", 4, a, 90) for a in (0.45, 0.15, 0.33)])
    assert "not significant" in headline(configurations(noisy, ["attention", "metric_rank"])).sentence


def test_seeds_that_do_not_vary_establish_nothing() -> None:
    """Two fresh seeds with the same difference give a zero-width interval: not a significant result."""
    flat = frame([("mha", 0, a, 100) for a in (0.30, 0.30, 0.40)] + [("damcha", 4, a, 90) for a in (0.30, 0.29, 0.39)])
    sentence = headline(configurations(flat, ["attention", "metric_rank"])).sentence
    assert (
        "paired t-test over 2 fresh seeds both trained on is undefined, the seeds not varying at all: not established" in sentence
    )
    assert ": significant" not in sentence


def test_headline_compares_a_family_dearer_than_the_best_mha_at_its_own_cost_and_says_so() -> None:
    dear = frame([("mha", 0, 0.30, 100), ("damcha", 4, 0.50, 150), ("damcha", 8, 0.60, 200)])
    sentence = headline(configurations(dear, ["attention", "metric_rank"])).sentence
    assert sentence.startswith(
        "No DAMCHA configuration completed at or below the best MHA's 100 FLOPs per example; "
        "its best (2.00× those FLOPs) gains 30.0 accuracy points against the best MHA (60.0% vs 30.0%"
    )
    cheaper = frame([("mha", 0, 0.30, 100), ("damcha", 4, 0.40, 90), ("damcha", 8, 0.60, 200)])
    assert headline(configurations(cheaper, ["attention", "metric_rank"])).sentence.startswith(
        "The best DAMCHA at ≤ MHA's FLOPs (0.90× its FLOPs) gains 10.0 accuracy points"
    )


def test_t_intervals_cover_the_truth_need_two_values_and_widen_for_few_seeds() -> None:
    rng = np.random.default_rng(1)
    low, high = mean_interval(rng.normal(0.5, 0.05, size=40))
    assert low < 0.5 < high and high - low < 0.05
    assert all(np.isnan(difference_interval(np.array([0.1]), np.array([0.2, 0.3]))))
    three = np.array([-0.006, -0.056, 0.016])  # three paired differences: mean ± 4.303 · s/√3 (t, 2 degrees of freedom)
    low, high = mean_interval(three)
    assert np.isclose(high - low, 2 * 4.303 * three.std(ddof=1) / np.sqrt(3))
    covered = 0
    for _ in range(400):  # 95% coverage with three values, where a percentile bootstrap covers far less
        sample = rng.normal(0.0, 1.0, size=3)
        low, high = mean_interval(sample)
        covered += low < 0.0 < high
    assert 0.92 < covered / 400 < 0.98
    low, high = difference_interval(rng.normal(1.0, 0.1, size=5), rng.normal(0.0, 1.0, size=5))  # Welch: unequal spreads
    assert low < 1.0 < high


def test_headline_compares_each_family_with_the_baseline_in_one_sentence_each() -> None:
    rows = frame([("mha", 0, 0.30, 100), ("damcha", 4, 0.35, 90), ("damcha", 8, 0.25, 80)])
    rows["family"] = ["MHA", "DAMCHA (paper)", "DAMCHA (cross)"]
    answer = headline(configurations(rows, ["attention", "metric_rank"]))
    assert [c.family for c in answer.comparisons] == ["DAMCHA (paper)", "DAMCHA (cross)"]
    assert "The best DAMCHA (paper) at ≤ MHA's FLOPs (0.90× its FLOPs) gains 5.0 accuracy points" in answer.sentence
    assert "The best DAMCHA (cross) at ≤ MHA's FLOPs (0.80× its FLOPs) trails by 5.0 accuracy points" in answer.sentence


def test_the_verdict_rests_on_fresh_seeds_not_on_the_selected_run() -> None:
    # Selected at 0.50 (a lucky seed), 0.30 on both fresh seeds; MHA 0.35 throughout.
    lucky = frame([("mha", 0, a, 100) for a in (0.35, 0.35, 0.36)] + [("damcha", 4, a, 90) for a in (0.50, 0.30, 0.31)])
    (comparison,) = headline(configurations(lucky, ["attention", "metric_rank"])).comparisons
    assert np.isclose(comparison.candidate_value, 0.305) and comparison.difference < 0


def test_without_fresh_seeds_the_verdict_says_it_is_uncorrected() -> None:
    answer = headline(configurations(frame([("mha", 0, 0.30, 100), ("damcha", 4, 0.35, 90)]), ["attention", "metric_rank"]))
    assert answer.comparisons[0].method == "uncorrected" and "uncorrected for selection" in answer.sentence


def in_bits_per_byte(rows: pd.DataFrame) -> pd.DataFrame:
    """The same trials measured in bits per byte, which a study minimises (as ``trials_frame`` gives them)."""
    rows = rows.rename(columns={"val_accuracy": "val_bits_per_byte"})
    rows["score"] = -rows["val_bits_per_byte"]
    rows.attrs[QUALITY_ATTRIBUTE] = QUALITIES["val_bits_per_byte"]
    return rows


def test_a_minimised_objective_selects_the_lowest_and_leads_when_lower() -> None:
    """The configuration a minimising study's repeats measure is its lowest value; a lower
    value leads, in the objective's own unit, not in accuracy points."""
    rows = in_bits_per_byte(
        frame(
            [("mha", 0, b, 100) for b in (2.10, 2.12, 2.11)]
            + [("damcha", 4, 3.00, 80)]  # worse (higher) and cheaper: not the best
            + [("damcha", 8, b, 90) for b in (1.90, 1.95, 1.93)]
        )
    )
    configs = configurations(rows, ["attention", "metric_rank"])
    assert configs.attrs["quality"].column == "val_bits_per_byte"
    (comparison,) = headline(configs).comparisons
    assert comparison.candidate["metric_rank"] == 8 and np.isclose(comparison.difference, -0.175)
    assert headline(configs).sentence.startswith(
        "The best DAMCHA at ≤ MHA's FLOPs (0.90× its FLOPs) leads by 0.175 bits per byte against the best MHA "
        "(1.940 vs 2.115 validation bits per byte on fresh seeds; 95% CI "
    )
    assert "bits per byte, paired t-test over 2 fresh seeds both trained on: significant)." in headline(configs).sentence
    worse = in_bits_per_byte(
        frame([("mha", 0, b, 100) for b in (2.1, 2.2, 2.0)] + [("damcha", 4, b, 90) for b in (2.6, 2.5, 2.7)])
    )
    assert "trails by 0.500 bits per byte" in headline(configurations(worse, ["attention", "metric_rank"])).sentence


def test_pareto_front_and_best_of_a_minimised_objective_keep_the_lowest_values() -> None:
    rows = in_bits_per_byte(frame([("mha", 0, 2.0, 100), ("mha", 0, 2.5, 50), ("damcha", 4, 3.0, 60), ("damcha", 8, 1.5, 200)]))
    assert best(rows)["val_bits_per_byte"] == 1.5
    assert pareto_mask(rows).tolist() == [True, True, False, True]  # 3.0 at 60 FLOPs: beaten by 2.5 at 50
