"""Which task can cross_head's quick preset decide? A pilot, trained before the preset changes.

    python -m benchmarks.task_pilot              # trains what benchmarks/pilots/cross_head-tasks.csv lacks, then summarizes
    python -m benchmarks.task_pilot --summary    # summarizes the rows the file holds; trains nothing

Each candidate task (``CANDIDATES``: a quick preset's task, training recipe and fixed knobs) trains the same
configurations (``CONFIGURATIONS``: MHA and rivals at D=64 with 2 heads, all within the verdict's cost band of
MHA's FLOPs on both tasks) on seeds 80000 + i, as a study's trial trains them (``train_trial``: one CPU thread,
two trials at once). Each row is written as its trial ends, so stopping the command loses at most the trials
it was training and re-running it trains the rest.

The summary gives, per task: MHA's test accuracy (mean and seed-to-seed SD) against chance and ceiling; each
configuration's paired difference from MHA over the seeds both trained, its paired SD, the power of the
verdict's paired t-test on the preset's 6 fresh seeds to detect a 2-point gap
(``studies.results.statistics.paired_power``) and the seeds that a power of 0.8 needs.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.truth.table import TableError, read_csv_checked
from common.outputs import exit_with, write_atomically
from search_space.space import Value
from storage import record
from studies.catalogue import CROSS_HEAD, LRA_SHARING
from studies.catalogue.recall_heads import MQAR_QUICK
from studies.catalogue.schema import Preset
from studies.engine.trainable import TrialDevice, train_trial
from studies.engine.trial_config import TrialSpec, resolved_knobs, trial_spec
from studies.engine.version import code_version
from studies.results.matching import matched
from studies.results.statistics import paired_power, seeds_for_power
from trainers.data.cache import default_cache_dir

PILOT = Path(__file__).resolve().parent / "pilots" / "cross_head-tasks.csv"
FIRST_SEED = 80_000  # seed i of every configuration is 80000 + i, as in the truth tables
GAP = 2.0  # accuracy points the preset's comparisons should detect
REPEATS = 6  # the fresh seeds a quick preset's verdict judges on (lra_sharing's repeat_seeds)


@dataclass(frozen=True)
class Candidate:
    """A task a quick preset could train: its data, recipe and fixed knobs (a preset's), and how many seeds the pilot
    trains each configuration on.

    Attributes:
        name: The task's name in the pilot's rows.
        preset: The preset whose task, ``train`` and ``fixed`` it takes (cross_head's space and families).
        seeds: Seeds per configuration.
        chance: Accuracy of guessing (the class prior's or the context's values').
    """

    name: str
    preset: Preset
    seeds: int
    chance: float


def _on_task(source: Preset) -> Preset:
    """cross_head's quick preset on ``source``'s task, recipe and fixed knobs."""
    return replace(CROSS_HEAD.preset("quick"), task=source.task, train=source.train, fixed=source.fixed)


CANDIDATES = (
    # lra_sharing's shallow ListOps (cross_head's quick task since its v5): 10 classes; its seed-to-seed SD of a
    # paired difference is about 1.3-1.6 points
    Candidate("listops", _on_task(LRA_SHARING.preset("quick")), seeds=6, chance=0.10),
    # MQAR, 4 pairs in 32 tokens, 2000 steps (cross_head's quick task until v4): a query's value is one of 4
    Candidate("mqar", _on_task(MQAR_QUICK), seeds=3, chance=0.25),
)

SHAPE: dict[str, Value] = {"d_model": 64, "num_heads": 2, "learning_rate": 1e-3}
# MHA and three rivals within 1.15x MHA's FLOPs at D=64 with 2 heads on both tasks (Talking-Heads and DCMHA
# 1.14x: their H x H score mixing is paid for at 2 heads; DAMCHA (cross) 1.01-1.02x with a static metric: a
# data-adaptive generator costs 1.17x on MQAR's two short layers).
CONFIGURATIONS: dict[str, dict[str, Value]] = {
    "MHA": {"attention": "mha"},
    "Talking-Heads": {"attention": "tha"},
    "DCMHA": {"attention": "dcmha", "router_rank": 2},
    "DAMCHA (cross)": {"attention": "damcha", "metric_mode": "cross", "metric_rank": 4, "generator_depth": 0},
}
BASELINE = "MHA"
COLUMNS = (
    "task",
    record.FAMILY,
    record.SEED_INDEX,
    "seed",
    record.ACCURACY,
    record.TEST_ACCURACY,
    record.FLOPS,
    record.WALL_SECONDS,
    "device",
    record.CODE_VERSION,
)


def trial_config(candidate: Candidate, family: str, seed_index: int, cache_dir: Path) -> TrialSpec:
    """What a Ray worker would be handed for this trial (``trial_spec``, as ``Ledger`` hands it over)."""
    # The knobs' whole domains: the pilot trains outside the quick preset's width.
    knobs = resolved_knobs(CROSS_HEAD.space, candidate.preset, {}, SHAPE | CONFIGURATIONS[family])
    return trial_spec(
        candidate.preset,
        knobs,
        FIRST_SEED + seed_index,
        number=seed_index,
        cache_dir=str(cache_dir),
        compile_cache_dir=str(cache_dir),
    )


def _train_row(task: str, family: str, seed_index: int, cache_dir: str) -> dict[str, object]:
    """Train one row of the pilot (in a worker process of its own)."""
    candidate = next(c for c in CANDIDATES if c.name == task)
    started = time.monotonic()
    metrics = train_trial(trial_config(candidate, family, seed_index, Path(cache_dir)), TrialDevice("cpu", 0.0, 1)).metrics
    return {
        "task": task,
        record.FAMILY: family,
        record.SEED_INDEX: seed_index,
        "seed": FIRST_SEED + seed_index,
        record.ACCURACY: metrics[record.ACCURACY],
        record.TEST_ACCURACY: metrics[record.TEST_ACCURACY],
        record.FLOPS: metrics[record.FLOPS],
        record.WALL_SECONDS: round(time.monotonic() - started, 3),
        "device": metrics["device"],
        record.CODE_VERSION: code_version(),
    }


def read_rows(path: Path) -> pd.DataFrame:
    """The pilot's rows (none where there is no file yet), checked.

    Raises:
        TableError: not a CSV, a column missing, or an accuracy that is not a number in [0, 1], named by its line.
    """
    if not path.exists():
        return pd.DataFrame(columns=list(COLUMNS))
    fix = "restore it with git checkout, or delete it to train anew"
    rows = read_csv_checked(path, COLUMNS, "a pilot file", fix)
    for column in (record.ACCURACY, record.TEST_ACCURACY):
        values = pd.to_numeric(rows[column], errors="coerce")
        bad = ~values.between(0.0, 1.0)
        if bad.any():
            raise TableError(f"{path}, line {int(bad.idxmax()) + 2}: {column} is not an accuracy in [0, 1]; {fix}")
    return rows


def train_missing(path: Path, workers: int) -> pd.DataFrame:
    """Train every candidate's configurations on its seeds where ``path`` lacks the row, writing each as it ends."""
    rows = read_rows(path)
    have = {(r["task"], r[record.FAMILY], int(r[record.SEED_INDEX])) for r in rows.to_dict("records")}
    wanted = [
        (candidate.name, family, index)
        for index in range(max(c.seeds for c in CANDIDATES))  # seed by seed: a stopped pilot has whole passes
        for candidate in CANDIDATES
        if index < candidate.seeds
        for family in CONFIGURATIONS
        if (candidate.name, family, index) not in have
    ]
    cache_dir = default_cache_dir().resolve()
    for candidate in CANDIDATES:
        candidate.preset.task.load(cache_dir)  # built once, as a study's driver builds it
    kept = rows.to_dict("records")
    path.parent.mkdir(parents=True, exist_ok=True)

    def keep(done: int, row: dict[str, object]) -> None:
        kept.append(row)
        kept.sort(key=lambda r: (str(r["task"]), int(r[record.SEED_INDEX]), list(CONFIGURATIONS).index(str(r[record.FAMILY]))))
        write_atomically(path, pd.DataFrame(kept, columns=list(COLUMNS)).to_csv(index=False))
        print(
            f"{done}/{len(wanted)}: {row['task']} {row[record.FAMILY]} seed {row[record.SEED_INDEX]}: "
            f"test {row[record.TEST_ACCURACY]:.3f} ({row[record.WALL_SECONDS]:.0f} s)",
            flush=True,
        )

    if workers == 1:  # in this process
        for done, (task, family, index) in enumerate(wanted, start=1):
            keep(done, _train_row(task, family, index, str(cache_dir)))
        return read_rows(path)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_train_row, task, family, index, str(cache_dir)) for task, family, index in wanted]
        for done, future in enumerate(as_completed(futures), start=1):
            keep(done, future.result())
    return read_rows(path)


def summarize(rows: pd.DataFrame) -> str:
    """Per task: MHA against chance and ceiling, each configuration's paired difference from MHA, its SD and power."""
    lines = []
    for candidate in CANDIDATES:
        task = rows[rows["task"] == candidate.name]
        if task.empty:
            continue
        by_family = {
            family: group.set_index(record.SEED_INDEX)[record.TEST_ACCURACY] * 100
            for family, group in task.groupby(record.FAMILY)
        }
        baseline = by_family.get(BASELINE)
        lines.append(f"{candidate.name} (chance {candidate.chance:.0%}):")
        if baseline is None or len(baseline) < 2:
            lines.append("  MHA has fewer than 2 seeds yet")
            continue
        flops = {family: float(group[record.FLOPS].iloc[0]) for family, group in task.groupby(record.FAMILY)}
        lines.append(
            f"  MHA {baseline.mean():.1f}% (SD {baseline.std(ddof=1):.1f}, {len(baseline)} seeds): "
            f"{baseline.mean() - 100 * candidate.chance:.1f} points above chance, {100 - baseline.mean():.1f} below ceiling"
        )
        for family in CONFIGURATIONS:
            if family == BASELINE or family not in by_family:
                continue
            seeds = baseline.index.intersection(by_family[family].index)
            differences = (by_family[family].loc[seeds] - baseline.loc[seeds]).to_numpy()
            ratio = flops[family] / flops[BASELINE]
            band = "" if matched(ratio) else ", outside the cost band"
            if len(differences) < 2:
                lines.append(f"  {family}: fewer than 2 shared seeds yet")
                continue
            deviation = float(np.std(differences, ddof=1))
            power = paired_power(GAP, deviation, REPEATS) if deviation > 0 else 1.0
            needed = seeds_for_power(GAP, deviation) if deviation > 0 else 2
            lines.append(
                f"  {family} ({ratio:.2f}x MHA's FLOPs{band}): {differences.mean():+.1f} points over {len(differences)} "
                f"seeds, paired SD {deviation:.1f}; power to detect {GAP:.0f} points on {REPEATS} seeds {power:.2f}, "
                f"{needed} seeds for 0.8"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.task_pilot", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--summary", action="store_true", help="summarize the rows the file holds; train nothing")
    parser.add_argument("--file", type=Path, default=PILOT, help=f"the pilot's rows (default: {PILOT.name} in benchmarks/pilots)")
    parser.add_argument("--workers", type=int, default=2, help="trials at once, one CPU thread each (default 2)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be 1 or more, got {args.workers}")
    try:
        rows = read_rows(args.file) if args.summary else train_missing(args.file, args.workers)
    except TableError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(summarize(rows))
    return 0


if __name__ == "__main__":
    exit_with(main)
