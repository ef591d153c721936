"""What a truth table says: each configuration's true values, each family's true front, the true
matched-cost verdict and each knob's true effect per family.

A configuration's true value is its mean over the table's seeds. The truth is judged as a study
is (``docs/verdict.md``), by the product's own rules: configurations are selected by their mean
validation accuracy, compared at matched cost (``studies.results.matching``) and judged on the
held-out test split, each of the table's seeds a shared seed of the paired t-test, Holm-corrected
(``studies.results.verdict``). ``truth_frame`` builds the trial frame that verdict reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmarks.truth.table import Table
from storage import record
from studies.results.fronts import family_fronts
from studies.results.names import FAMILIES_ATTRIBUTE, KNOBS_ATTRIBUTE, QUALITY_ATTRIBUTE, SCORE
from studies.results.quality import QUALITIES
from studies.results.statistics import mean_interval
from studies.results.verdict import Comparison, Headline, verdict

CONFIGURATION_COLUMNS = (record.FAMILY, record.POINT)  # with the knobs: what identifies a configuration


def configurations(table: Table) -> pd.DataFrame:
    """One row per configuration: its family, point, knobs, cost and true values.

    Returns:
        Columns ``family``, ``baseline``, ``point``, the knobs, ``seeds`` (rows it has),
        ``val_accuracy`` and ``test_accuracy`` (means over its seeds), ``test_low``/``test_high``
        (the test mean's 95% t-interval), ``val_by_seed``/``test_by_seed`` (seed index -> value),
        ``flops_per_example``, ``parameters``, ``wall_seconds`` (the median over its seeds:
        robust to a run slowed by other work on the machine). Ordered as the table first lists them.
    """
    rows = table.rows
    records = []
    keys = [*CONFIGURATION_COLUMNS, *table.knobs]
    for _, group in rows.groupby([rows[k].map(repr) for k in keys], sort=False):  # None is a value here
        first = group.iloc[0]
        tests = group[record.TEST_ACCURACY].to_numpy(dtype=float)
        low, high = mean_interval(tests)
        records.append(
            {name: first[name] for name in keys}
            | {
                "baseline": bool(first["baseline"]),
                "seeds": len(group),
                record.ACCURACY: float(group[record.ACCURACY].mean()),
                record.TEST_ACCURACY: float(tests.mean()),
                "test_low": low,
                "test_high": high,
                "val_by_seed": dict(zip(group[record.SEED_INDEX].astype(int), group[record.ACCURACY].astype(float), strict=True)),
                "test_by_seed": dict(zip(group[record.SEED_INDEX].astype(int), tests, strict=True)),
                record.FLOPS: float(first[record.FLOPS]),
                "parameters": int(first["parameters"]),
                record.WALL_SECONDS: float(group[record.WALL_SECONDS].median()),
            }
        )
    return pd.DataFrame(records)


def truth_frame(configs: pd.DataFrame, knobs: list[str], families: list[str]) -> pd.DataFrame:
    """The truth as a trial frame (``studies.results.frame.trials_frame``'s columns and attributes), so
    that the product's verdict reads it as it reads a study: each configuration one search run valued
    at its mean validation accuracy, each of its table seeds a fresh-seed repeat (index = seed + 1).

    Args:
        configs: ``configurations(table)``.
        knobs: The knob columns.
        families: The family labels, the baseline's first.
    """
    rows = []
    for number, config in configs.iterrows():
        common = {name: config[name] for name in (*CONFIGURATION_COLUMNS, *knobs, "baseline", record.FLOPS, "parameters")}
        common |= {"state": "COMPLETE", record.EXAMPLES_PER_S: float("nan"), record.WALL_SECONDS: config[record.WALL_SECONDS]}
        rows.append(
            common
            | {"number": int(number), record.ACCURACY: config[record.ACCURACY], record.REPEAT_OF: None, record.REPEAT_INDEX: None}
        )
        for index, value in config["test_by_seed"].items():
            rows.append(
                common
                | {
                    "number": len(configs) + len(rows),
                    record.ACCURACY: config["val_by_seed"][index],
                    record.TEST_ACCURACY: value,
                    record.REPEAT_OF: int(number),
                    record.REPEAT_INDEX: index + 1,
                }
            )
    frame = pd.DataFrame(rows)
    frame[SCORE] = frame[record.ACCURACY].astype(float)
    frame.attrs[KNOBS_ATTRIBUTE] = list(knobs)
    frame.attrs[QUALITY_ATTRIBUTE] = QUALITIES[record.ACCURACY]
    frame.attrs[FAMILIES_ATTRIBUTE] = list(families)
    return frame


def true_verdict(table: Table) -> Headline:
    """The matched-cost verdict the table's seeds give, by the product's own rules."""
    return verdict(truth_frame(configurations(table), table.knobs, families(table)))


def point_truths(table: Table) -> dict[tuple, Comparison]:
    """Each named point's true comparison for each of its variants (the searched knobs it leaves, such
    as width and heads), as a study that trains that variant alone would make it.

    Returns:
        ``(point label, *the variant's knob values)`` -> the true comparison of that variant
        (``variant_key`` makes the key of a replay's candidate).
    """
    configs = configurations(table)
    found: dict[tuple, Comparison] = {}
    points = configs[configs[record.POINT].notna()]
    for _, variant in points.iterrows():
        others = configs[(configs[record.POINT] != variant[record.POINT]) | configs[record.POINT].isna()]
        alone = pd.concat([others, variant.to_frame().T], ignore_index=True)
        headline = verdict(truth_frame(alone, table.knobs, families(table)))
        comparison = next((c for c in headline.comparisons if c.family == variant[record.POINT]), None)
        if comparison is not None:
            found[variant_key(str(variant[record.POINT]), variant, table.knobs)] = comparison
    return found


def variant_key(point: str, values: Mapping[str, object], knobs: list[str]) -> tuple:
    """A named point's variant: its label and its knob values (None where a knob is missing or NaN)."""
    return (point, *(None if (value := values.get(name)) is None or value != value else value for name in knobs))


def true_fronts(configs: pd.DataFrame) -> pd.DataFrame:
    """Each family's configurations on its own Pareto front of true test accuracy against FLOPs, cheapest first."""
    frame = configs.assign(state="COMPLETE", **{SCORE: configs[record.TEST_ACCURACY]})
    return configs[family_fronts(frame)].sort_values([record.FAMILY, record.FLOPS], kind="stable")


@dataclass(frozen=True)
class KnobEffect:
    """How changing one knob from one value to another moves a family's configurations, all else equal.

    Attributes:
        family: The family.
        knob: The knob.
        low, high: The values compared (``high - low``).
        pairs: Configurations compared: pairs that differ in this knob alone.
        difference: Mean test accuracy difference, in points (each pair's mean over the seeds both have).
        interval: Its 95% t-interval over the pairs.
        flops_ratio: The mean FLOPs ratio ``high / low``: whether the change also changes the cost.
    """

    family: str
    knob: str
    low: object
    high: object
    pairs: int
    difference: float
    interval: tuple[float, float]
    flops_ratio: float


def knob_effects(configs: pd.DataFrame, knobs: list[str]) -> list[KnobEffect]:
    """Each knob's true effect per family: configurations that differ in that knob alone, compared
    seed by seed (the ``i``-th seed is shared), between each value and the knob's first value."""
    effects = []
    for family, group in configs[configs[record.POINT].isna()].groupby(record.FAMILY, sort=False):
        present = [k for k in knobs if group[k].notna().all() and group[k].nunique() > 1]
        for knob in present:
            others = [k for k in present if k != knob]
            values = list(dict.fromkeys(group[knob]))
            for value in values[1:]:
                differences, ratios = [], []
                for _, pair in group.groupby([group[k].map(repr) for k in others] or [np.zeros(len(group))], sort=False):
                    low, high = pair[pair[knob] == values[0]], pair[pair[knob] == value]
                    if low.empty or high.empty:
                        continue
                    a, b = low.iloc[0]["test_by_seed"], high.iloc[0]["test_by_seed"]
                    shared = sorted(set(a) & set(b))
                    if shared:
                        differences.append(100 * float(np.mean([b[i] - a[i] for i in shared])))
                        ratios.append(float(high.iloc[0][record.FLOPS]) / float(low.iloc[0][record.FLOPS]))
                if differences:
                    effects.append(
                        KnobEffect(
                            str(family),
                            knob,
                            values[0],
                            value,
                            len(differences),
                            float(np.mean(differences)),
                            mean_interval(np.array(differences)),
                            float(np.mean(ratios)),
                        )
                    )
    return effects


def families(table: Table) -> list[str]:
    """The table's family labels, the baseline's first, then as the table lists them."""
    rows = table.rows.sort_values("baseline", ascending=False, kind="stable")
    return list(dict.fromkeys(rows[record.FAMILY]))


def significant(interval: tuple[float, float]) -> bool:
    """Whether a 95% interval excludes zero."""
    low, high = interval
    return not (math.isnan(low) or low <= 0 <= high)
