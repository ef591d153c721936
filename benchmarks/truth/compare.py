"""Search strategies compared by replaying many studies of each on a truth table.

    python -m benchmarks.truth.compare                        # 100 replays of each strategy on lra_sharing's table
    python -m benchmarks.truth.compare --study cross_head     # on cross_head's table, as its quick preset runs
    python -m benchmarks.truth.compare --replays 20 --only random
    python -m benchmarks.truth.compare --trials 48 --only "TPE per family"   # at twice the quick budget
    python -m benchmarks.truth.compare --repeat-seeds 3       # the compared configurations on 3 fresh seeds, not 6
    python -m benchmarks.truth.compare --markdown             # the summary as docs/truth.md shows it
    python -m benchmarks.truth.compare --against today        # each strategy against one, study seed by study seed
    python -m benchmarks.truth.compare --seeds 300-599        # those study seeds only, replayed and summarized
    python -m benchmarks.truth.compare --trials 28 --only "band, ASHA" --against "band, ASHA" --against-trials 24   # budgets

Each replay (``benchmarks.truth.replay``) is one row of ``benchmarks/truth/<table>-replays.csv``,
written as it ends, with its budget (trials, repeat seeds), the table's content hash and its scheme
(``SCHEME``): re-running the same command replays only what that file lacks for the table as it is now
(a table that grew, or rows of an earlier scheme, are replayed afresh). Beside every strategy's replays,
the two reference protocols' of the same study seeds (``benchmarks.truth.skill``: no search, always
abstain), as rows of their own; they search nothing, so a study seed's row at one search budget is copied to
another of the same repeat seeds, not replayed again.

Every row is scored against the cross-fitted truth (``benchmarks.truth.skill.Referee``). The summary gives,
per strategy: how often it is right (every comparison the truth decides decided alike, none the truth leaves
open answered wrongly), with its 95% Wilson interval; its skill over each reference protocol on the same
study seeds, with a paired bootstrap interval; each comparison's share decided alike, or (where the truth is
undetermined) covering the out-of-sample gap, deciding, and deciding wrongly; each family's mean regret
(true test accuracy points of the truth's selected configuration less the replay's) and how often it
reaches a point; the study's device-hours; the median device-hours until the configurations it completed
cover 95% of each family's true hypervolume (mean over families); and that share's mean over the first
``--horizon`` device-hours. ``--against NAME`` prints instead each strategy against one, replay by replay of
the same study seed (``paired``).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path

import optuna
import pandas as pd
import torch

from benchmarks.truth.replay import replay
from benchmarks.truth.replays_file import KEYS, ReplaysBusyError, alone, read_replays, replays_path, table_version
from benchmarks.truth.scoring import agreement
from benchmarks.truth.seed_roles import replay_preset
from benchmarks.truth.skill import REFERENCES, Referee, References, answer_fields, recipe_of
from benchmarks.truth.strategies import STRATEGIES
from benchmarks.truth.summaries import paired, summary
from benchmarks.truth.table import Table, TableError, add_table_arguments, chosen_table, load
from benchmarks.truth.truth import configurations, point_truths
from common.outputs import exit_with, write_atomically
from studies.catalogue.schema import Preset, Study
from studies.engine.options import StudyOptionError, check_trials_cover_families
from studies.results.verdict import Comparison

# How a row's seeds were drawn and what it is scored against: fresh judging seeds per study seed, a seed of its
# own for every search trial, the cross-fitted truth (``skill.Referee``), no search at the preset's recipe
# (``skill.recipe_of``). Rows of an earlier scheme are redone.
SCHEME = "fresh judging seeds, cross-fitted truth, no search at the recipe"


MAX_REPLAYS = 100_000  # study seeds a run replays or summarizes: each is a row held in memory


@dataclass(frozen=True)
class _Replaying:
    """What every replay of one run of ``run_replays`` reads: a worker process gets it once, when forked."""

    definition: Study
    preset: Preset
    table: Table
    referee: Referee
    references: References
    variants: dict[tuple, Comparison]
    configs: pd.DataFrame
    version: str


_REPLAYING: _Replaying | None = None  # a worker's, set by _start_worker


def _start_worker(replaying: _Replaying) -> None:
    """A worker's start: what its replays read, and one thread for torch (GPSampler's), whose own pool
    of one thread per CPU in every worker at once made a GP replay 8× slower on 2 cores."""
    global _REPLAYING
    _REPLAYING = replaying
    torch.set_num_threads(1)


def _replay_row(name: str, seed: int) -> dict[str, object]:
    """One replay of strategy ``name`` (or of a reference protocol, ``skill.REFERENCES``) from study seed
    ``seed``, scored: a row of the replays file."""
    assert _REPLAYING is not None, "_start_worker sets what a replay reads"
    r = _REPLAYING
    started = time.monotonic()
    budget = {"strategy": name, "trials": r.preset.trials, "repeat_seeds": r.preset.repeat_seeds, "seed": seed}
    budget |= {"table": r.version, "scheme": SCHEME}
    if name in REFERENCES:
        scored_reference = r.references.rows(r.preset.repeat_seeds, seed)[name]
        return budget | scored_reference | {"replay_seconds": round(time.monotonic() - started, 3)}
    result = replay(r.definition, r.preset, r.table, STRATEGIES[name], seed)
    scored = agreement(r.referee.truth, result.headline, r.configs, r.table.knobs, r.variants)
    answers = answer_fields(result.headline)
    return {
        **budget,
        **answers,
        **r.referee.score(answers),
        "agrees": scored.agrees,
        **{f"agrees: {label}": value for label, value in scored.per_label.items()},
        "concludes": scored.concludes_alike,
        **{f"concludes: {label}": value for label, value in scored.concludes.items()},
        **{f"regret: {label}": value for label, value in scored.regret.items()},
        **{f"sign: {label}": value for label, value in scored.sign.items()},
        "search_hours": result.device_hours[0],
        "repeat_hours": result.device_hours[1],
        "sampler_hours": round(result.sampler_hours, 6),
        "fallback_repeats": result.fallback_repeats,
        "leaked_repeats": result.leaked_repeats,
        "reused_search_seeds": result.reused_search_seeds,
        "hypervolume": json.dumps([[round(h, 5), round(s, 5)] for h, s in result.hypervolume]),
        "replay_seconds": round(time.monotonic() - started, 3),
    }


def run_replays(
    table_file: Path,
    names: list[str],
    replays: int,
    definition: Study,
    preset: Preset,
    *,
    workers: int = 1,
    first_seed: int = 0,
) -> pd.DataFrame:
    """Replay ``replays`` studies (seeds ``first_seed``, ``first_seed + 1``, ...) of each strategy named,
    keeping each as it ends.

    Args:
        table_file: The table (its replays are kept beside it: ``replays_path``).
        names: Strategies (``STRATEGIES``).
        replays: Studies of each.
        definition: The study the table is of.
        preset: Its budget, whose space the table covers (its ``trials`` and ``repeat_seeds``: the replayed
            studies'; the repeats capped at the table's judging seeds, ``replay_preset``).
        workers: Replays at once, each in a process of its own (a replay is single-threaded Python);
            a replay's figures do not depend on it, only its ``replay_seconds``.
        first_seed: The first study seed replayed.

    Returns:
        Every replay of the strategies named at this budget (the file's, whatever their seeds, and the
        new ones), one row each, by
        strategy (in ``names``' order) and seed.

    Raises:
        ReplaysBusyError: another run is replaying into the same file.
        TableError: ``table_file`` is not a table, or its replays file is not one (``read_replays``).
    """
    path = replays_path(table_file)
    with alone(path):
        table = load(table_file)
        if preset.trials > len(table.rows):
            raise StudyOptionError(
                f"{preset.trials} trials is more than {table_file.name} has rows ({len(table.rows)}): a replayed study "
                "reads the table's seeds, so give --trials up to that"
            )
        version = table_version(table_file)  # replays of another state of the table are redone
        preset = replay_preset(preset, table)
        referee, configs = Referee.of(table), configurations(table)
        replaying = _Replaying(
            definition,
            preset,
            table,
            referee,
            References(table, referee, configs, recipe_of(preset, table.knobs)),
            point_truths(table),
            configs,
            version,
        )
        done = read_replays(path) if path.exists() else pd.DataFrame(columns=list(KEYS))
        # Rows of another state of the table, or of another scheme of seeds and scores, are redone.
        rows = [row for row in done.to_dict("records") if row["table"] == version and row.get("scheme") == SCHEME]
        budget = (preset.trials, preset.repeat_seeds)
        have = {(row["strategy"], int(row["trials"]), int(row["repeat_seeds"]), int(row["seed"])) for row in rows}
        names = [*names, *(name for name in REFERENCES if name not in names)]  # the references beside every strategy
        # The references search nothing: a study seed's reference row at another search budget with the same repeats
        # is this budget's, copied rather than replayed again.
        searchless = {
            (row["strategy"], int(row["seed"])): row
            for row in rows
            if row["strategy"] in REFERENCES and int(row["repeat_seeds"]) == preset.repeat_seeds
        }
        copied = [
            searchless[name, seed] | {"trials": preset.trials}
            for name in REFERENCES
            for seed in range(first_seed, first_seed + replays)
            if (name, *budget, seed) not in have and (name, seed) in searchless
        ]
        rows += copied
        have |= {(row["strategy"], *budget, int(row["seed"])) for row in copied}
        wanted = [
            (name, seed)
            for name in names
            for seed in range(first_seed, first_seed + replays)
            if (name, *budget, seed) not in have
        ]
        # The file in one order whatever a run names (``STRATEGIES``', then strategies no longer there), so that
        # its diffs show the rows a run added; then by budget and seed.
        known = [*STRATEGIES, *REFERENCES, *(row["strategy"] for row in rows)]
        order = {name: rank for rank, name in enumerate(dict.fromkeys(known))}

        def keep(row: dict[str, object] | None = None) -> None:
            rows.extend([row] if row is not None else [])
            rows.sort(
                key=lambda kept: (order[str(kept["strategy"])], int(kept["trials"]), int(kept["repeat_seeds"]), int(kept["seed"]))
            )
            write_atomically(path, pd.DataFrame(rows).to_csv(index=False))

        if copied:
            keep()
        if workers <= 1 or len(wanted) <= 1:
            _start_worker(replaying)
            for name, seed in wanted:
                keep(_replay_row(name, seed))
        else:  # forked: the workers inherit the table and the study (a study's lambdas do not pickle)
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(replaying,)) as pool:
                for future in as_completed([pool.submit(_replay_row, name, seed) for name, seed in wanted]):
                    keep(future.result())
        frame = pd.DataFrame(rows)
        at_budget = (frame["trials"] == preset.trials) & (frame["repeat_seeds"] == preset.repeat_seeds)
        frame = frame[frame["strategy"].isin(names) & at_budget]
        return frame.sort_values("strategy", key=lambda column: column.map(names.index), kind="stable").reset_index(drop=True)


def _seed_range(text: str) -> range:
    """``FIRST-LAST`` (study seeds, inclusive) as a range.

    Raises:
        argparse.ArgumentTypeError: not two whole numbers with FIRST <= LAST.
    """
    first, _, last = text.partition("-")
    if not (first.isdigit() and last.isdigit() and int(first) <= int(last)):
        raise argparse.ArgumentTypeError(f"{text!r} is not FIRST-LAST with 0 <= FIRST <= LAST, e.g. 300-599")
    return range(int(first), int(last) + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.truth.compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_table_arguments(parser)
    parser.add_argument(
        "--replays",
        type=int,
        help=f"studies replayed per strategy (seeds 0 .. N-1; default 100, at most {MAX_REPLAYS}: a row each in memory); "
        "the summary reads every seed kept",
    )
    parser.add_argument(
        "--seeds",
        metavar="FIRST-LAST",
        type=_seed_range,
        help=f"replay study seeds FIRST to LAST (inclusive, at most {MAX_REPLAYS} of them) and summarize those alone "
        "(instead of --replays)",
    )
    parser.add_argument(
        "--trials",
        type=int,
        help="trials of each replayed study, its families' and named points' (default: the quick preset's; at most the "
        "table's rows)",
    )
    parser.add_argument(
        "--repeat-seeds",
        type=int,
        metavar="K",
        help="fresh seeds each compared configuration is repeated on (default: the quick preset's, at most the "
        "table's judging seeds)",
    )
    parser.add_argument("--only", action="append", default=[], help="strategies whose name contains this (repeatable)")
    parser.add_argument("--horizon", type=float, default=1.0, help="device-hours over which the hypervolume share is averaged")
    parser.add_argument("--markdown", action="store_true", help="print the summary as a Markdown table (docs/truth.md's)")
    parser.add_argument(
        "--against", metavar="NAME", help="print each strategy against the one whose name contains NAME, study seed by study seed"
    )
    parser.add_argument(
        "--against-trials",
        type=int,
        metavar="T",
        help="with --against: that strategy's studies of T trials (the others' of --trials), paired by study seed",
    )
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="replays at once, a process each (default: this machine's CPUs)"
    )
    args = parser.parse_args(argv)
    if args.seeds is not None and args.replays is not None:
        parser.error("--seeds and --replays both choose the study seeds: give one")
    seeds = args.seeds or range(100 if args.replays is None else args.replays)
    if args.replays is not None and not 1 <= args.replays <= MAX_REPLAYS:
        parser.error(f"--replays must be 1 to {MAX_REPLAYS}, got {args.replays}")
    if len(seeds) > MAX_REPLAYS:
        parser.error(f"--seeds must span at most {MAX_REPLAYS} study seeds, got {len(seeds)}")
    if args.repeat_seeds is not None and args.repeat_seeds < 1:
        parser.error(f"--repeat-seeds must be 1 or more, got {args.repeat_seeds}")
    if args.workers < 1:
        parser.error(f"--workers must be 1 or more, got {args.workers}")
    if not (math.isfinite(args.horizon) and args.horizon > 0):
        parser.error(f"--horizon must be a positive number of device-hours, got {args.horizon}")
    if args.against_trials is not None and args.against is None:
        parser.error("--against-trials sets the budget of the --against strategy: give --against NAME too")
    names = [name for name in STRATEGIES if not args.only or any(part in name for part in args.only)]
    if not names:
        print(f"error: no strategy matches {args.only}; strategies: {', '.join(STRATEGIES)}", file=sys.stderr)
        return 2
    definition, args.table = chosen_table(parser, args)
    preset = definition.preset("quick")
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the workers, forked, inherit the quiet
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    try:
        if args.trials is not None:
            check_trials_cover_families(definition, args.trials)
            preset = replace(preset, trials=args.trials)
        if args.repeat_seeds is not None:
            preset = replace(preset, repeat_seeds=args.repeat_seeds)
        matches = [name for name in names if args.against is not None and args.against in name]
        if args.against is not None and len(matches) != 1:
            print(f"error: --against {args.against!r} names {len(matches)} of the strategies replayed; name one", file=sys.stderr)
            return 2
        frame = run_replays(args.table, names, len(seeds), definition, preset, workers=args.workers, first_seed=seeds.start)
        against = matches[0] if matches else None
        if against is not None and args.against_trials is not None:  # its studies of another budget, under a name of their own
            check_trials_cover_families(definition, args.against_trials)
            other = replace(preset, trials=args.against_trials)
            theirs = run_replays(
                args.table, [against], len(seeds), definition, other, workers=args.workers, first_seed=seeds.start
            )
            renamed = f"{against} ({args.against_trials} trials)"  # beside its own rows at --trials: a budget against another
            frame = pd.concat([frame, theirs[theirs["strategy"] == against].assign(strategy=renamed)])
            against = renamed
    except (TableError, StudyOptionError, ReplaysBusyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.seeds is not None:
        frame = frame[frame["seed"].isin(seeds)].reset_index(drop=True)
    families = [family.label for family in definition.families]
    if against is not None:
        table = paired(frame, against, args.horizon, families).set_index("strategy")
    else:
        table = summary(frame, args.horizon).set_index("strategy")
    if args.markdown:
        print(table.to_markdown())
        return 0
    with pd.option_context("display.max_columns", None, "display.width", 250):
        print(table.T.to_string())
    return 0


if __name__ == "__main__":
    exit_with(main)
