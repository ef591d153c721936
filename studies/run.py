"""Run a named study: ``python -m studies.run NAME [options]``; ``--list`` shows the studies.

Exit codes: ``EPILOG`` (``--help`` prints them); docs/guarantees.md says what each promises.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

# Only what the command line needs before it runs: --help and bad arguments answer without torch, Ray or
# datasets (seconds of imports); main imports the rest once the arguments are read.
from common.naming import UnknownNameError
from common.outputs import TUNE_DIR, OutputPathError, exit_with
from storage import (
    DEFAULT_STORAGE_URL,
    STORAGE_URL_VARIABLE,
    StorageURLError,
    StoreBusyError,
    failed_database,
    full_disk,
    masked_url,
    resolve_storage_url,
)
from storage.repeats_study import RepeatsStudyError
from studies.engine.ray_address import prepare_ray_environment
from studies.engine.signals import exit_code, stop_cause, stop_on_signals
from trainers.data.lra_files import DATA_DIR_VARIABLE, DataFileError
from trainers.precisions import PRECISIONS

if TYPE_CHECKING:
    from search_space.space import Value

EPILOG = """examples:
  python -m studies.run lra_sharing                       # the quick preset, local Ray, SQLite store
  python -m studies.run lra_sharing --preset smoke        # a whole study in about a minute on 2 cores
  python -m studies.run lra_sharing --plan                # what a run would do and cost; writes nothing
  python -m studies.run lra_sharing --fix num_heads=4     # pin a knob (a separate study)
  optuna-dashboard sqlite:///runs/optuna.db               # browse the store

exit codes:
  0    done
  2    bad input (nothing is written), or a store or disk that failed during the run (the finished trials
       are in the store: the same command resumes)
  3    another driver is writing to the same SQLite store
  130  interrupted by Ctrl-C (143 SIGTERM, 129 SIGHUP, 138 SIGUSR1): the stopped trials are failed and
       retried by the next run; the report is not rewritten
  1    an unexpected error
"""


def parse_knob_value(text: str) -> Value:
    """``"4"`` -> 4, ``"1e-3"`` -> 0.001, anything else stays a string."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _fix(text: str) -> tuple[str, Value]:
    name, separator, value = text.partition("=")
    if not separator or not name or not value:
        raise argparse.ArgumentTypeError(f"{text!r} is not KNOB=VALUE (e.g. num_heads=4)")
    return name.strip(), parse_knob_value(value.strip())


def integer_from(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum`` (every count a command line takes)."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be >= {minimum}")
        return value

    return parse


def positive_number(text: str) -> float:
    """An argparse type: a finite number above 0 (a duration, a size)."""
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{value} must be a number above 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line, with every option's default in its help."""
    parser = argparse.ArgumentParser(
        prog="python -m studies.run",
        description="Run a DAMCHA study: trials on Ray Tune, every trial in an Optuna store, an HTML report.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", nargs="?", help="study or suite to run (see --list)")
    parser.add_argument("--list", action="store_true", help="list the studies and exit")
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print what the run would do and cost (its trials, data, a step of each family's largest and smallest "
        "configuration measured here, the wall time, device-hours for GPU presets) and exit, writing nothing "
        "(default: run the study)",
    )
    parser.add_argument("--preset", help="budget: smoke, quick or full (default: the study's default, quick)")
    parser.add_argument(
        "--trials",
        type=integer_from(1),
        help="trials in the study, baselines and finished ones included (default: the preset's)",
    )
    parser.add_argument(
        "--storage",
        help=f"Optuna storage URL, or env:NAME to read it from variable NAME "
        f"(default: ${STORAGE_URL_VARIABLE}, else {DEFAULT_STORAGE_URL})",
    )
    parser.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray on this machine's CPUs)")
    parser.add_argument("--cpus-per-trial", type=float, help="CPUs per trial (default: the preset's, 1 for smoke/quick)")
    parser.add_argument(
        "--gpus-per-trial", type=float, help="GPUs per trial, fractions allowed (default: the preset's, 0 for smoke/quick)"
    )
    parser.add_argument(
        "--trial-memory",
        type=float,
        metavar="GIB",
        help="host memory one trial may use, in GiB: a trial that needs more fails with an out-of-memory reason "
        "and Ray runs only as many trials at once as fit (default: no budget)",
    )
    parser.add_argument(
        "--seed", type=integer_from(0), default=0, help="seed of the sampler and of every trial's training (default: 0)"
    )
    parser.add_argument(
        "-o", "--report", type=Path, help="report HTML path, as python -m reports -o (default: runs/reports/<study name>.html)"
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start a new study instead of resuming; the old one is kept untouched (default: resume)",
    )
    parser.add_argument(
        "--fix",
        type=_fix,
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="pin a knob for every trial; repeatable (default: none)",
    )
    parser.add_argument(
        "--repeat-seeds",
        type=int,
        metavar="K",
        help="after the search, train the configurations the verdict compares (each family's best at matched "
        "cost, the MHA it faces, each named point) on K fresh seeds shared by the families, judged on the test "
        "split; 0: none, and the verdict says it is uncorrected (default: the preset's)",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="training precision: fp32, or bf16 autocast (default: the preset's; fp32 for smoke/quick, bf16 for full)",
    )
    parser.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        help="torch.compile every model, or not (default: the preset's; on for full only)",
    )
    parser.add_argument("--data-cache", type=Path, help="data cache directory (default: $DAMCHA_DATA_CACHE, else runs/data)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="the unpacked lra_release directory, for studies of tasks that read the LRA release files "
        f"(default: ${DATA_DIR_VARIABLE}); for lm_rank, a directory of text files or hf:NAME[:CONFIG], "
        "a data set that `datasets` resolves (default: the Python standard library's source)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    os.umask(0o077)  # the store, its lock, reports and Ray's files describe studies: their owner's alone
    parser = build_parser()
    args = parser.parse_args(argv)
    from search_space.space import SearchSpaceError
    from studies.catalogue import STUDIES, SUITES, get_runnable
    from studies.catalogue.schema import Suite

    if args.list:
        runnable = {**STUDIES, **SUITES}
        width = max(len(name) for name in runnable)
        for name, study in runnable.items():
            print(f"{name:<{width}}  {study.summary}")
        return 0
    if args.name is None:
        parser.error("the study name is required (see --list)")
    given: dict[str, list[str]] = {}
    for name, value in args.fix:
        given.setdefault(name, []).append(str(value))
    if twice := {name: values for name, values in sorted(given.items()) if len(values) > 1}:
        shown = "; ".join(f"{name}: {', '.join(values)}" for name, values in twice.items())
        parser.error(f"argument --fix: each knob once, got {shown}")
    if not args.plan:
        prepare_ray_environment(args.address)
        stop_on_signals()
    from studies.engine.options import RunOptions, StudyOptionError

    options = RunOptions(
        preset=args.preset,
        trials=args.trials,
        storage=args.storage,
        address=args.address,
        cpus_per_trial=args.cpus_per_trial,
        gpus_per_trial=args.gpus_per_trial,
        trial_memory_gib=args.trial_memory,
        seed=args.seed,
        report=args.report,
        fresh=args.fresh,
        fix=dict(args.fix),
        cache_dir=args.data_cache,
        data_dir=args.data_dir,
        repeat_seeds=args.repeat_seeds,
        precision=args.precision,
        compile=args.compile,
    )
    try:
        runnable = get_runnable(args.name)
        studies = list(runnable.studies.values()) if isinstance(runnable, Suite) else [runnable]
        if args.plan:  # no Ray: nothing is started
            from studies.engine.plan import plan

            planned = replace(options, preset=options.preset or runnable.default_preset)
            print("\n\n".join(plan(study, planned).text for study in studies))
        else:
            from studies.show import run_and_show  # imports ray: after prepare_ray_environment

            run_and_show(runnable, options, sys.stdout)
    except (
        UnknownNameError,
        SearchSpaceError,
        StorageURLError,
        StudyOptionError,
        OutputPathError,
        DataFileError,
        RepeatsStudyError,
    ) as error:
        parser.error(str(error))  # exit code 2, like any other bad option
    except StoreBusyError as error:
        print(f"error: {error}", file=sys.stderr)
        return 3
    except Exception as error:  # a disk filled or the database went away during the run: no bug to show
        if (failed := _failure(error, resolve_storage_url(options.storage))) is None:
            raise
        print(f"{parser.prog}: error: {failed}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP (studies.engine.signals)
        print(
            f"interrupted ({stop_cause()}): the finished trials are in the store, the stopped ones marked failed; "
            "run the same command again to resume",
            file=sys.stderr,
        )
        return exit_code()
    return 0


def _failure(error: BaseException, url: str) -> str | None:
    """What failed under a run, and the fix, in one sentence, from the error it met: a full disk (the
    store's, Ray Tune's folder, the data cache) or a database that failed (a server shut down, a connection
    lost); None for anything else (a bug)."""
    resume = "run the same command again (the finished trials are in the store; the running ones are retried)"
    if (full := full_disk(error, url)) is not None:
        full = full or f"a folder this run writes (Ray Tune's {TUNE_DIR}, the data cache)"  # the library named none
        return f"no space left on the disk of {full}: free space there, then {resume}"
    if (words := failed_database(error, url)) is not None:
        return f"the store {masked_url(url)} failed during the run ({words}): once it answers again, {resume}"
    return None


if __name__ == "__main__":
    exit_with(main)
