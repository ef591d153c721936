"""Many processes asking and telling one Optuna study at once: SQLite against PostgreSQL.

Each of N worker processes runs ask → (a tiny objective) → tell as fast as it can for a
fixed time, on one shared study. The table gives trials per second, errors (e.g.
"database is locked") and whether the store ended consistent (every told trial present
once, no trial left RUNNING, trial numbers unique).

    python -m benchmarks.store_scale                           # N = 1 2 4 8 16, 10 s each; a throw-away PostgreSQL
    python -m benchmarks.store_scale --workers 1 4 --seconds 3 --no-postgres
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import tempfile
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from common.postgres_server import postgres_binaries, throwaway_postgres
from storage import masked_url, open_storage
from studies.run import integer_from, positive_number


def _worker(url: str, study_name: str, seconds: float, results) -> None:  # noqa: ANN001 (a spawn-context queue)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    told, errors, first_error = 0, 0, ""
    try:
        study = optuna.load_study(study_name=study_name, storage=open_storage(url), sampler=optuna.samplers.RandomSampler())
    except Exception as error:  # noqa: BLE001 (counted and reported, whatever it is)
        results.put((0, 1, f"load: {type(error).__name__}: {error}"[:200]))
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            trial = study.ask()
            x = trial.suggest_float("x", -1, 1)
            study.tell(trial, x * x)
            told += 1
        except Exception as error:  # noqa: BLE001
            errors += 1
            first_error = first_error or f"{type(error).__name__}: {str(error).splitlines()[0]}"[:200]
    results.put((told, errors, first_error))


def measure(url: str, workers: int, seconds: float) -> dict:
    """Run ``workers`` processes on a fresh study; return rate, errors and consistency."""
    name = f"scale-{workers}-{time.time_ns()}"
    optuna.create_study(study_name=name, storage=open_storage(url))
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no connection pool inherited
    results = context.Queue()
    processes = [context.Process(target=_worker, args=(url, name, seconds, results)) for _ in range(workers)]
    start = time.monotonic()
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=seconds + 120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    elapsed = time.monotonic() - start
    told = sum(o[0] for o in outcomes)
    trials = optuna.load_study(study_name=name, storage=open_storage(url)).get_trials(deepcopy=False)
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    stuck = sum(t.state == TrialState.RUNNING for t in trials)
    unique = len({t.number for t in trials}) == len(trials)
    return {
        "workers": workers,
        "trials/s": told / elapsed,
        "errors": sum(o[1] for o in outcomes),
        "consistent": complete == told and stuck == 0 and unique,
        "stuck RUNNING": stuck,
        "first error": next((o[2] for o in outcomes if o[2]), ""),
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.store_scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=integer_from(1), nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--seconds", type=positive_number, default=10.0)
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rows = []
    with tempfile.TemporaryDirectory() as scratch, contextlib.ExitStack() as stack:
        stores = {"sqlite": f"sqlite:///{Path(scratch) / 'scale.db'}"}
        bin_dir = None if args.no_postgres else postgres_binaries()
        if bin_dir is not None:
            stores["postgresql"] = stack.enter_context(throwaway_postgres(bin_dir))
        elif not args.no_postgres:
            print("PostgreSQL not available (apt-get install postgresql, as root): SQLite only")
        for kind, url in stores.items():
            for workers in args.workers:
                rows.append({"store": kind} | measure(url, workers, args.seconds))
                print(f"{kind} N={workers} done ({masked_url(url)})", flush=True)
    print(f"{'store':<11} {'N':>3} {'trials/s':>9} {'errors':>7} {'stuck':>6} {'consistent':>10}  first error")
    for row in rows:
        print(
            f"{row['store']:<11} {row['workers']:>3} {row['trials/s']:>9.1f} {row['errors']:>7} {row['stuck RUNNING']:>6} "
            f"{str(row['consistent']):>10}  {row['first error']}"
        )


if __name__ == "__main__":
    main()
