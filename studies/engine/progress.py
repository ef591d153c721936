"""One live progress line while a study runs, instead of Ray's table dump."""

from __future__ import annotations

import math
import sys
import time
from typing import Any

from ray.tune import Callback

from reports.results.quality import quality_named
from studies.engine.ledger import Ledger


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes:02d}:{seconds:02d}"


def progress_line(ledger: Ledger, elapsed: float, concurrency: int) -> str:
    """``trials 3/12 done · 2 running · best acc 0.412 · 01:02 elapsed · ETA 03:10`` (``bpb`` for bits per byte)."""
    done = ledger.finished_count()
    running = len(ledger.open) - len(ledger.ended)  # ended trials wait to be told to Optuna (``Ledger``)
    name = quality_named(ledger.objective.metric, ledger.objective.direction == "maximize").short
    best = "-" if ledger.best_value is None else f"{ledger.best_value:.3f}"
    if ledger.durations and done < ledger.total:
        mean = sum(ledger.durations) / len(ledger.durations)
        eta = _clock(mean * math.ceil((ledger.total - done) / max(concurrency, 1)))
    else:
        eta = "--:--" if done < ledger.total else "00:00"
    return f"trials {done}/{ledger.total} done · {running} running · best {name} {best} · {_clock(elapsed)} elapsed · ETA {eta}"


class ProgressLine(Callback):
    """Rewrites one line on a terminal (or prints a line per change elsewhere), at most once a second."""

    def __init__(self, ledger: Ledger, concurrency: int) -> None:
        self.ledger, self.concurrency = ledger, concurrency
        self.start = time.monotonic()
        self.last_shown, self.last_line = 0.0, ""

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        now = time.monotonic()
        if now - self.last_shown < 1.0:
            return
        self.last_shown = now
        line = progress_line(self.ledger, now - self.start, self.concurrency)
        stream = sys.stderr  # looked up at each write: Tune pickles its callbacks, and streams don't pickle
        if stream.isatty():
            stream.write("\r" + line.ljust(len(self.last_line)))
        elif line.split(" · ")[:3] != self.last_line.split(" · ")[:3]:
            stream.write(line + "\n")
        stream.flush()
        self.last_line = line

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        line = progress_line(self.ledger, time.monotonic() - self.start, self.concurrency)
        sys.stderr.write(("\r" if sys.stderr.isatty() else "") + line + "\n")
        sys.stderr.flush()
