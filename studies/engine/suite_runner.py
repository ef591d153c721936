"""Running a suite (``studies.catalogue.schema.Suite``): each task's study in turn by
``studies.engine.runner.run_study`` on one Ray session, then the suite's report.

Every task's options and data files are checked before the first study starts, so a
missing file of the last task writes no store and no report (the caches of the tasks
read before it are kept: valid, and reused by the next run).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TextIO

import optuna
import ray

from common.outputs import write_atomically
from reports.files import report_path
from reports.suite_report import suite_html, suite_lines
from storage import masked_url, open_storage
from studies.catalogue.schema import Suite
from studies.engine.cluster import start_ray
from studies.engine.options import RunOptions, check_options
from studies.engine.runner import FinishedRun, run_study
from studies.results.frame import trials_frame
from trainers.data.cache import default_cache_dir


def run_suite(suite: Suite, options: RunOptions, out: TextIO | None = None) -> list[FinishedRun]:
    """Run (or resume) every study of a suite, then write the suite's report.

    Args:
        suite: The suite.
        options: The run's options; ``report`` names the suite's report (each study's
            own report goes to its default path).
        out: Where the summaries go (default: ``sys.stdout`` at call time).

    Returns:
        Each study's outcome, in the suite's order.

    Raises:
        StudyOptionError, SearchSpaceError, StorageURLError, UnknownNameError,
            DataFileError: bad input or data of any task, before any store or report is written.
        StoreBusyError: another driver is writing to the same SQLite store.
    """
    out = out or sys.stdout
    preset = options.preset or suite.default_preset
    options = replace(options, preset=preset)
    cache_dir = (options.cache_dir or default_cache_dir()).resolve()
    checked = [check_options(study, options) for study in suite.studies.values()]
    for run in checked:  # every task's files, before the first store is touched
        if run.preset.task.reads_files:
            run.preset.task.load(cache_dir)
    started = start_ray(options.address)
    # each task's study records the suite's command, the one that made it (a task's name is not a command)
    task_options = replace(options, report=None, command=options.command_line(suite.name))
    try:
        outcomes = [run_study(study, task_options, out) for study in suite.studies.values()]
    finally:
        if started:
            ray.shutdown()
    url = checked[0].url
    stores = {
        title: optuna.load_study(study_name=outcome.study_name, storage=open_storage(url, read_only=True))
        for title, outcome in zip(suite.studies, outcomes, strict=True)
    }
    report = options.report or report_path(suite.report_name(preset), url)
    frames = {title: trials_frame(store) for title, store in stores.items()}  # read once: the page and the lines
    links = {name: _relative(outcome.report, report.parent) for name, outcome in zip(stores, outcomes, strict=True)}
    write_atomically(report, suite_html(suite.report_name(preset), suite.doc, stores, frames, url, links))
    print("\n".join([f"\n{suite.report_name(preset)}", *suite_lines(frames), f"  report: {report}"]), file=out)
    print(f"  store:  {masked_url(url)}", file=out)
    return outcomes


def _relative(path: Path, folder: Path) -> str:
    """``path`` as a link from a page in ``folder`` (absolute where it lies elsewhere)."""
    try:
        return str(path.resolve().relative_to(folder.resolve()))
    except ValueError:
        return path.resolve().as_uri()
