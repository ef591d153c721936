"""What the command line shows of a run: each study's report and summary as it ends, then a suite's page.

The engine runs and stores (``studies.engine.runner``, ``studies.engine.suite_runner``); this module
renders what they return, so that a run's results are read once and shown in the order they end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from common.outputs import OutputPathError, write_atomically
from reports.files import report_path
from reports.html import write_report
from reports.suite_report import suite_html, suite_lines
from reports.summary import summary
from storage import masked_url
from studies.catalogue.schema import Study, Suite
from studies.engine.options import RunOptions
from studies.engine.progress import clock, run_seconds
from studies.engine.runner import FinishedRun, run_study
from studies.engine.suite_runner import run_suite
from studies.results.frame import trials_frame


def run_and_show(runnable: Study | Suite, options: RunOptions, out: TextIO) -> list[FinishedRun]:
    """Run a study or a suite, and show each study's report and summary as it ends (a suite's page last).

    Args:
        runnable: The study or suite.
        options: The run's options.
        out: Where messages, summaries and the report's path go.

    Returns:
        Each study's run, in order.

    Raises:
        Whatever ``run_study`` or ``run_suite`` raise; OutputPathError: a report cannot be written.
    """
    if isinstance(runnable, Suite):  # ``--report`` names the suite's page: each study's report takes its default path
        finished = run_suite(runnable, options, out, ended=lambda run: show_study(run, out))
        show_suite(runnable, options, finished, out)
        return finished
    finished_run = run_study(runnable, options, out)
    show_study(finished_run, out, report=options.report)
    return [finished_run]


def show_study(finished: FinishedRun, out: TextIO, report: Path | None = None) -> Path:
    """Write a finished run's report, then print its summary and how long the command has taken.

    Args:
        finished: The run.
        out: Where the summary goes.
        report: The report's path (``--report``); None: the default path of the study's name (``report_path``).

    Returns:
        The report's path.

    Raises:
        OutputPathError: the report cannot be written (no space left, say); the trials and the verdict are in
            the store, and no partial page is left.
    """
    report = report or report_path(finished.study_name, finished.storage)
    try:
        write_report(finished.study, report, finished.storage, results=finished.results)
    except OSError as error:
        raise OutputPathError(
            f"cannot write the report {report}: {error.strerror or error}; the trials are in the store: free "
            f"space, then python -m reports {finished.study_name} -o FILE"
        ) from None
    print(summary(finished.study, masked_url(finished.storage), report, finished.results), file=out)
    took = clock(run_seconds())
    print(f"  took:   {took} in all (imports and Ray's start, the trials, the summary and the report)", file=out)
    return report


def show_suite(suite: Suite, options: RunOptions, finished: list[FinishedRun], out: TextIO) -> Path:
    """Write a suite's page (a table per task, the cross-task average, a link to each study's report) and
    print its lines.

    Args:
        suite: The suite.
        options: The run's options (``report``: the page's path; else the default path of the suite's name).
        finished: Each study's run, in the suite's order.
        out: Where its lines go.

    Returns:
        The page's path.
    """
    name = suite.report_name(options.preset or suite.default_preset)
    url = finished[0].storage
    report = options.report or report_path(name, url)
    stores = {title: run.study for title, run in zip(suite.studies, finished, strict=True)}
    frames = {title: trials_frame(store) for title, store in stores.items()}  # read once: the page and the lines
    studies = zip(suite.studies, finished, strict=True)
    links = {title: _relative(report_path(run.study_name, run.storage), report.parent) for title, run in studies}
    write_atomically(report, suite_html(name, suite.doc, stores, frames, url, links))
    print("\n".join([f"\n{name}", *suite_lines(frames), f"  report: {report}"]), file=out)
    print(f"  store:  {masked_url(url)}", file=out)
    return report


def _relative(path: Path, folder: Path) -> str:
    """``path`` as a link from a page in ``folder`` (absolute where it lies elsewhere)."""
    try:
        return str(path.resolve().relative_to(folder.resolve()))
    except ValueError:
        return path.resolve().as_uri()
