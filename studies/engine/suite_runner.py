"""Running a suite (``studies.catalogue.schema.Suite``): each task's study in turn by
``studies.engine.runner.run_study`` on one Ray session (its report is the command line's: ``studies.show``).

Every task's options and data files are checked before the first study starts, so a
missing file of the last task writes no store and no report (the caches of the tasks
read before it are kept: valid, and reused by the next run).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TextIO

import ray

from studies.catalogue.schema import Suite
from studies.engine.cluster import start_ray
from studies.engine.options import RunOptions, check_options
from studies.engine.runner import FinishedRun, run_study


def run_suite(
    suite: Suite, options: RunOptions, out: TextIO | None = None, ended: Callable[[FinishedRun], None] | None = None
) -> list[FinishedRun]:
    """Run (or resume) every study of a suite.

    Args:
        suite: The suite.
        options: The run's options; ``report`` names the suite's report (each study's
            own report goes to its default path).
        out: Where the studies' messages go (default: ``sys.stdout`` at call time).
        ended: Called with each study's run as it ends, before the next starts (the command line shows it).

    Returns:
        Each study's run, in the suite's order.

    Raises:
        StudyOptionError, SearchSpaceError, StorageURLError, UnknownNameError,
            DataFileError: bad input or data of any task, before any store or report is written.
        StoreBusyError: another driver is writing to the same SQLite store.
    """
    out = out or sys.stdout
    options = replace(options, preset=options.preset or suite.default_preset)
    checked = [check_options(study, options) for study in suite.studies.values()]
    for run in checked:  # every task's files, before the first store is touched
        if run.preset.task.reads_files:
            run.preset.task.load(run.cache_dir)
    started = start_ray(options.address)
    # each task's study records the suite's command, the one that made it (a task's name is not a command)
    task_options = replace(options, report=None, command=options.command_line(suite.name))
    finished = []
    try:
        for study in suite.studies.values():
            finished.append(run_study(study, task_options, out))
            if ended is not None:
                ended(finished[-1])
    finally:
        if started:
            ray.shutdown()
    return finished
