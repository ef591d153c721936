"""How well a run's plan and its live ETA predict its wall time: the plan made, then the run made, side by side.

The plan is made here as ``--plan`` makes it, on a new store in a temporary folder; the run is then the
real command (``python -m studies.run``) on that store, its progress lines read as they are printed.
Printed: the plan's estimate against the run's wall time (from the command's start to its exit), and each
progress line's predicted end (its elapsed time plus its ETA) against the real end, from a quarter of the
run on: the largest error and the errors at a quarter, a half and three quarters of it. Exit code 1 when
the plan is off by more than 25% or an ETA from a quarter on by more than 20% (the targets, on an
idle machine); 2 for an unknown study or preset, or a GPU preset; the run's own code when it fails (130
or 143 when a SIGINT or SIGTERM sent here, which is passed on to the run, stopped it).

    python -m benchmarks.wall_time lra_sharing --preset smoke
    python -m benchmarks.wall_time lra_sharing --preset quick      # about half an hour on 2 cores
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common.naming import UnknownNameError
from common.outputs import exit_with
from studies.catalogue import get_study
from studies.engine.errors import StudyOptionError
from studies.engine.options import RunOptions
from studies.engine.plan import plan

PLAN_TOLERANCE, ETA_TOLERANCE = 0.25, 0.20
STOPPING = (signal.SIGINT, signal.SIGTERM)  # passed on to the run
_PROGRESS = re.compile(r"· (\d+):(\d\d) elapsed · ETA (\d+):(\d\d)(?: (?:from|at) .*)?$")  # the repeats say their pace


@dataclass(frozen=True)
class Sighting:
    """One progress line: the run's clock and its ETA, both as the line says (seconds)."""

    elapsed: float
    eta: float


def _seconds(minutes: str, seconds: str) -> float:
    return 60 * int(minutes) + int(seconds)


def run_and_watch(study: str, preset: str, store: Path) -> tuple[float, list[Sighting], int]:
    """Run the study on ``store``, reading its progress lines as they come. A SIGINT or SIGTERM sent here is
    passed to the run, which stops as it would alone; this waits for it, so that nothing it writes is removed
    under it.

    Returns:
        The command's wall seconds, each progress line's (elapsed, ETA), its exit code.
    """
    command = [sys.executable, "-m", "studies.run", study, "--preset", preset, "--storage", f"sqlite:///{store}"]
    command += ["--report", str(store.with_suffix(".html"))]
    started = time.monotonic()
    # A session of its own: a Ctrl-C at the terminal reaches the run once, passed on from here, as SIGTERM does.
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    forward = {number: signal.signal(number, lambda received, _: process.send_signal(received)) for number in STOPPING}
    sightings = []
    assert process.stdout is not None
    try:
        for line in process.stdout:
            sys.stdout.write(line)
            if found := _PROGRESS.search(line.rstrip()):
                sightings.append(Sighting(_seconds(*found.group(1, 2)), _seconds(*found.group(3, 4))))
        code = process.wait()
    finally:
        for number, handler in forward.items():
            signal.signal(number, handler)
    return time.monotonic() - started, sightings, code


def eta_errors(sightings: list[Sighting], wall: float, start_share: float = 0.25) -> list[tuple[float, float]]:
    """``(share of the run elapsed, predicted end's error as a share of the run)`` for each line from ``start_share`` on."""
    return [(s.elapsed / wall, (s.elapsed + s.eta - wall) / wall) for s in sightings if s.elapsed >= start_share * wall]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; exit code 1 when a prediction misses its target."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.wall_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("study")
    parser.add_argument("--preset", default="quick")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="wall-time-") as folder:
        store = Path(folder) / "optuna.db"
        try:
            planned = plan(get_study(args.study), RunOptions(preset=args.preset, storage=f"sqlite:///{store}"))
        except (UnknownNameError, StudyOptionError) as error:
            print(f"error: {error.args[0] if error.args else error}", file=sys.stderr)
            return 2
        print(planned.text, flush=True)
        if planned.wall_seconds is None:
            print(f"{args.study} {args.preset} trains on GPUs: its plan gives no wall time here", file=sys.stderr)
            return 2
        wall, sightings, code = run_and_watch(args.study, args.preset, store)
    if code:  # 130 or 143 where it was stopped by a signal passed on to it
        print(f"the run exited {code}: nothing to compare", file=sys.stderr)
        return code
    plan_error = planned.wall_seconds / wall - 1
    errors = eta_errors(sightings, wall)
    print(f"\nplan: {planned.wall_seconds:.0f} s estimated, {wall:.0f} s taken: {plan_error:+.0%}")
    if errors:
        worst = max(errors, key=lambda error: abs(error[1]))
        at = {mark: min(errors, key=lambda error: abs(error[0] - mark)) for mark in (0.25, 0.5, 0.75)}
        print(
            f"ETA from a quarter of the run on ({len(errors)} lines): worst {worst[1]:+.0%} (at {worst[0]:.0%} of the run); "
            + ", ".join(f"at {mark:.0%}: {error:+.0%}" for mark, (_, error) in at.items())
        )
    missed = abs(plan_error) > PLAN_TOLERANCE or any(abs(error) > ETA_TOLERANCE for _, error in errors)
    return 1 if missed else 0


if __name__ == "__main__":
    exit_with(main)
