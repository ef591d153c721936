"""Can a finished study tell designs apart? The two criteria a preset must meet, read from its store.

(a) The verdict's 95% interval is at most 2 accuracy points wide on each side (half-width
    ≤ 2), for every family compared (a study of another objective: the half-width is
    printed in its unit, against no target).
(b) The best and the worst complete configurations differ by more than their intervals:
    over their seeds where they have two or more (a t-interval), else the
    single run's 95% Wilson interval for the predictions its accuracy counts (the trial's
    ``val_count``: examples, or for MQAR the queried positions; accuracy studies only).

    python -m benchmarks.resolution lra_sharing-quick-v6                 # the default store
    python -m benchmarks.resolution NAME --storage sqlite:///path/to/store.db
"""

from __future__ import annotations

import argparse
import math

import optuna
import pandas as pd

from storage import StorageURLError, open_storage, record
from studies.results.configurations import configurations
from studies.results.frame import knob_columns, trials_frame
from studies.results.quality import quality
from studies.results.verdict import verdict

Z_95 = 1.959963984540054
HALF_WIDTH_POINTS = 2.0


def wilson_interval(accuracy: float, examples: int) -> tuple[float, float]:
    """The 95% Wilson score interval of an accuracy measured on ``examples`` examples."""
    centre = (accuracy + Z_95**2 / (2 * examples)) / (1 + Z_95**2 / examples)
    spread = Z_95 / (1 + Z_95**2 / examples) * math.sqrt(accuracy * (1 - accuracy) / examples + Z_95**2 / (4 * examples**2))
    return centre - spread, centre + spread


def validation_count(frame: pd.DataFrame, study: optuna.Study, config: pd.Series) -> int:
    """How many predictions a configuration's accuracy counts: its trials' recorded
    ``val_count``, else (stores from before it was recorded) the task's ``val_size``.

    Raises:
        ValueError: neither is known.
    """
    counts = frame.loc[frame["number"].isin(config["numbers"]), record.VAL_COUNT].dropna()
    if not counts.empty:
        return int(counts.min())
    if size := study.user_attrs.get(record.TASK, {}).get("val_size"):
        return int(size)
    raise ValueError("the store records no validation size for this task (trials from before val_count was recorded)")


def interval(config: pd.Series, examples: int) -> tuple[float, float, str]:
    """A configuration's 95% interval of accuracy, and what it is over: the t-interval over its
    seeds, else the Wilson interval of one validation pass (one run; or seeds that agree
    exactly, where t is undefined and the validation set's sampling is what is left)."""
    if config["seeds"] >= 2 and not math.isnan(config["ci_low"]):
        return float(config["ci_low"]), float(config["ci_high"]), f"t-interval over {int(config['seeds'])} seeds"
    low, high = wilson_interval(float(config["mean"]), examples)
    if config["seeds"] >= 2:
        return low, high, f"Wilson on {examples} examples: its {int(config['seeds'])} seeds agree exactly"
    return low, high, f"Wilson, one run on {examples} examples"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.resolution", description=__doc__.splitlines()[0])
    parser.add_argument("study", help="the study's name in the store")
    parser.add_argument("--storage", default=None, help="storage URL (default: the product's default store)")
    args = parser.parse_args(argv)
    try:
        study = optuna.load_study(study_name=args.study, storage=open_storage(args.storage, read_only=True))
    except StorageURLError as error:
        parser.error(str(error))
    except KeyError:  # Optuna's word for a study the store does not hold
        parser.error(f"the store holds no study {args.study!r}: python -m reports list names its studies")
    frame = trials_frame(study)
    measured = quality(frame)
    answer = verdict(frame)
    print(f"verdict: {answer.sentence}\n")
    target = f"target <= {HALF_WIDTH_POINTS:g} points" if measured.percent else f"in {measured.unit}, no target"
    print(f"(a) the verdict's 95% half-width, per family compared ({target}):")
    for comparison in answer.comparisons:
        low, high = comparison.interval
        half = (high - low) / 2
        met = ("met" if half <= HALF_WIDTH_POINTS else "NOT met") if measured.percent else "measured"
        unit = "points" if measured.percent else measured.unit
        shown = f"{half:.{measured.decimals + 1}f} {unit}"
        how = "untested" if comparison.test is None else f"{comparison.test.name}, {comparison.test.seeds[0]} seeds"
        print(f"  {comparison.family}: {shown} ({how}): {met}")
    configs = configurations(frame, knob_columns(frame))
    if len(configs) < 2:
        print("(b) fewer than two complete configurations")
        return 0
    if not measured.percent:
        print(f"(b) needs an accuracy (single runs' Wilson intervals); this study measures {measured.label}")
        return 0
    # A configuration without fresh seeds counts by its search run (one run on validation data: a Wilson interval).
    ranked = configs.assign(mean=configs["mean"].fillna(configs["search_value"])).sort_values("mean")
    worst, best = ranked.iloc[0], ranked.iloc[-1]
    try:
        best_low, best_high, best_how = interval(best, validation_count(frame, study, best))
        worst_low, worst_high, worst_how = interval(worst, validation_count(frame, study, worst))
    except ValueError as error:
        print(f"(b) {error}")
        return 0
    print("(b) the best and the worst complete configurations (target: intervals apart):")
    for name, config, low, high, how in (
        ("best", best, best_low, best_high, best_how),
        ("worst", worst, worst_low, worst_high, worst_how),
    ):
        print(f"  {name}: {config[record.FAMILY]} {100 * config['mean']:.1f}% [{100 * low:.1f}, {100 * high:.1f}] ({how})")
    gap = 100 * (best_low - worst_high)
    print(f"  {'met' if gap > 0 else 'NOT met'}: {gap:+.1f} points between the intervals")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
