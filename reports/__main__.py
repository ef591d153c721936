"""Write a study's report, list a store's studies, or compare studies.

    python -m reports STUDY [--storage URL] [-o FILE] [--plotlyjs inline|cdn] [--png DIR]
                            [--csv DIR] [--markdown FILE|-]
    python -m reports list [--storage URL] [--format text|json|csv|markdown]
    python -m reports compare STUDY STUDY ... [--storage URL ...] [-o FILE] [--png DIR]
                              [--csv DIR] [--markdown FILE|-]

A STUDY is a whole name (``lra_sharing-quick-v6``) or a short one: ``lra_sharing`` is the
newest version of its default preset in the store (or of the one preset the store has of it),
``lra_sharing-smoke`` of its smoke preset.
``compare`` looks each name up in every ``--storage`` given and compares all it finds (the
same study from two stores, say).

Exit codes: 0 written, 2 bad input (unknown or ambiguous study, unusable storage URL, a store
that does not exist or is damaged, an output path where nothing can be written). The store
is only read: nothing is created, migrated or reconfigured there.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import optuna
import pandas as pd

from common.outputs import REPORTS_DIR, OutputPathError, check_writable_dir, check_writable_file, exit_with, write_atomically
from reports.files import report_path, study_file_stem
from reports.images import RendererError, check_renderer, write_images
from reports.store_index import AmbiguousNameError, listing, listing_data, resolve_study_name
from storage import (
    DEFAULT_STORAGE_URL,
    STORAGE_URL_VARIABLE,
    StorageURLError,
    open_storage,
    resolve_storage_url,
    store_files,
)
from storage.repeats_study import linked_repeats
from studies.results import StudyResults

FORMATS = ("text", "json", "csv", "markdown")  # what ``list`` prints


@dataclass(frozen=True)
class Found:
    """A study read from a store, and the store's URL (shown masked)."""

    study: optuna.Study
    url: str


def _find(stores: dict[str, optuna.storages.BaseStorage], wanted: str, *, everywhere: bool) -> list[Found]:
    """The studies ``wanted`` names: in the first store only, or (``everywhere``) in each store that has one.

    Raises:
        LookupError: no store has it (the first store's closest names offered).
        AmbiguousNameError: a short name means two studies in one store.
    """
    found, errors = [], []
    for url, storage in stores.items():
        try:
            name = resolve_study_name(wanted, optuna.get_all_study_summaries(storage), url)
        except AmbiguousNameError:
            raise
        except LookupError as error:
            errors.append(error)
            continue
        found.append(Found(optuna.load_study(study_name=name, storage=storage), url))
        if not everywhere:
            break
    if not found:
        raise errors[0]
    return found


def build_parser() -> argparse.ArgumentParser:
    """The command line; every option shows its default."""
    parser = argparse.ArgumentParser(
        prog="python -m reports", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "studies", nargs="+", metavar="STUDY", help="a study name; 'list'; or 'compare' followed by several names"
    )
    parser.add_argument(
        "--storage",
        action="append",
        metavar="URL",
        help=f"Optuna storage URL, or env:NAME (default: ${STORAGE_URL_VARIABLE}, else {DEFAULT_STORAGE_URL}); "
        "compare takes several",
    )
    parser.add_argument(
        "-o", "--output", type=Path, help="HTML file (default: runs/reports/<study>.html, or runs/reports/compare.html)"
    )
    parser.add_argument(
        "--plotlyjs",
        choices=("inline", "cdn"),
        default="inline",
        help="embed plotly.js (works offline, ~5 MB) or link it from the CDN (default: inline)",
    )
    parser.add_argument(
        "--png", type=Path, metavar="DIR", help="also write each figure as PNG into DIR (needs Chrome/Chromium; default: no)"
    )
    parser.add_argument(
        "--csv",
        type=Path,
        metavar="DIR",
        help="also write <study>-fronts.csv and <study>-verdict.csv into DIR; compare: compare-fronts.csv and "
        "compare-verdict.csv, a study column first (default: no)",
    )
    parser.add_argument(
        "--markdown", metavar="FILE", help="also write the verdict and both tables as Markdown to FILE, or - for stdout"
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        help="list: text, or the same as data on stdout: one row per study and family (default: text)",
    )
    return parser


def _check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, list[str]]:
    """The command (``report``, ``list`` or ``compare``) and its study names; refuses options it does not take."""
    first, names = args.studies[0], args.studies[1:]
    if first == "list":
        command = "list"
        if names:
            parser.error(f"list takes no study names (got {' '.join(names)})")
    elif first == "compare":
        command = "compare"
        if not names:
            parser.error("compare needs at least one study name (found in two stores) or two names")
    else:
        command, names = "report", args.studies
        if len(names) != 1:
            parser.error("give one study name, 'list', or 'compare' and several names")
    stores = args.storage or [None]
    if len(stores) > 1 and command != "compare":
        parser.error(f"{command} reads one store: give --storage once (compare takes several)")
    refused = {"list": ("output", "png", "csv", "markdown"), "compare": ("format",), "report": ("format",)}[command]
    for name in refused:
        if getattr(args, name) is not None:
            parser.error(f"{command} writes no {'-o file' if name == 'output' else '--' + name}: leave the option out")
    return command, names


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    os.umask(0o077)  # reports describe a store: their owner's alone
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created in memory" lines
    parser = build_parser()
    args = parser.parse_args(argv)
    command, names = _check_arguments(parser, args)
    try:
        urls = list(dict.fromkeys(resolve_storage_url(url) for url in (args.storage or [None])))
        stores = {url: open_storage(url, read_only=True) for url in urls}
        if command == "list":
            print(
                listing(stores[urls[0]], urls[0])
                if args.format in (None, "text")
                else _as(args.format, listing_data(stores[urls[0]]))
            )
            return 0
        output = args.output or (REPORTS_DIR / "compare.html" if command == "compare" else None)
        found = [one for name in names for one in _find(stores, name, everywhere=command == "compare")]
        if command == "compare" and len(found) < 2:
            raise LookupError(f"compare found only {found[0].study.study_name}: name another study, or give another --storage")
        for one in found:  # a study of seed repeats that is not the search's is refused here, before any reading
            linked_repeats(one.study)
        output = output or report_path(found[0].study.study_name, found[0].url)
        kept = [path for url in urls for path in store_files(url)]  # no output may overwrite a store
        check_writable_file(output, "-o", keep=kept)
        for directory, option in ((args.png, "--png"), (args.csv, "--csv")):
            if directory:
                check_writable_dir(directory, option)
        if args.png:
            check_renderer()
        tables_name = _tables_name([(one.study.study_name, one.url) for one in found])
        for path, option in _table_paths(tables_name, args):
            check_writable_file(path, option, keep=kept)
    except (StorageURLError, LookupError, OutputPathError, RendererError) as error:
        parser.error(str(error))
    from reports.html import compare_html, compared, report_html  # plotly: seconds of import that `list` never needs

    try:
        if command == "compare":
            read = compared([(one.study, one.url) for one in found])
            page, figures = compare_html(read, plotlyjs=args.plotlyjs)
        else:
            read = {found[0].study.study_name: StudyResults.read(found[0].study)}
            page, figures = report_html(
                found[0].study, found[0].url, plotlyjs=args.plotlyjs, results=read[found[0].study.study_name]
            )
        path = write_atomically(output, page)
        said = sys.stderr if args.markdown == "-" else sys.stdout  # stdout holds the Markdown alone
        _write_tables(read, tables_name, args, said)
        if args.png:
            print(write_images(figures, args.png), file=said)
    except OSError as error:  # a full disk, say: write_atomically left no partial file
        parser.error(f"cannot write {error.filename or output}: {error.strerror or error}; free space there or give another path")
    except RendererError as error:  # the renderer worked before the work began, then failed
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"report: {path}", file=said)
    return 0


def _tables_name(studies: list[tuple[str, str]]) -> str:
    """What the table files are named after: the one study (``study_file_stem``: its name, and its store's
    tag unless the store is the default one), or ``compare`` for several.

    Args:
        studies: Each study's name and its store's URL.
    """
    return study_file_stem(*studies[0]) if len(studies) == 1 else "compare"


def _table_paths(name: str, args: argparse.Namespace) -> list[tuple[Path, str]]:
    """The files ``--csv`` and ``--markdown`` write (stdout is none), with the option that names each."""
    paths = [(args.csv / f"{name}-{table}.csv", "--csv") for table in ("fronts", "verdict")] if args.csv else []
    return paths + ([(Path(args.markdown), "--markdown")] if args.markdown not in (None, "-") else [])


def _write_tables(read: dict[str, StudyResults], name: str, args: argparse.Namespace, said: TextIO) -> None:
    """``--csv`` and ``--markdown``: the tables as data (``reports.tables``), of one study or (several: a
    comparison) each study's, with a ``study`` column first; what was written is ``said``.

    Args:
        read: Each study's results, by label.
        name: What the CSV files are named after (``_tables_name``).
        args: The parsed command line (``--csv``, ``--markdown``).
        said: Where the files written are named.
    """
    from reports.tables import fronts_data, markdown, verdict_data

    if args.csv:  # for analysis: numbers as numbers, one quantity a column (the display strings are Markdown's)
        for table, data in (("fronts", fronts_data), ("verdict", verdict_data)):
            frames = [data(results) for results in read.values()]
            if len(read) > 1:
                frames = [frame.assign(study=label)[["study", *frame.columns]] for label, frame in zip(read, frames, strict=True)]
            frame = pd.concat(frames, ignore_index=True)
            print(f"{table} table: {write_atomically(args.csv / f'{name}-{table}.csv', frame.to_csv(index=False))}", file=said)
    if args.markdown:
        text = "\n".join(markdown(label, results) for label, results in read.items())
        if args.markdown == "-":
            print(text)
        else:
            print(f"markdown: {write_atomically(Path(args.markdown), text)}", file=said)


def _as(form: str, frame: pd.DataFrame) -> str:
    """A table as JSON (records), CSV or Markdown text."""
    if form == "json":
        return frame.to_json(orient="records", indent=1, force_ascii=False)
    if form == "csv":
        return frame.to_csv(index=False).rstrip("\n")
    return frame.to_markdown(index=False)


if __name__ == "__main__":
    exit_with(main)
