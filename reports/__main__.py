"""Write a study's report, or compare studies.

    python -m reports STUDY_NAME [--storage URL] [-o FILE] [--plotlyjs inline|cdn] [--png DIR]
    python -m reports compare STUDY_A STUDY_B ... [--storage URL] [-o FILE]

Exit codes: 0 written, 2 bad input (unknown study, unusable storage URL, a store that
does not exist or is damaged, an output path where nothing can be written). The store is
only read: nothing is created, migrated or reconfigured there.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import optuna

from reports.files import OutputPathError, check_writable_dir, check_writable_file, report_path
from reports.html import compare_html, report_html
from reports.images import write_images
from storage import (
    DEFAULT_STORAGE_URL,
    STORAGE_URL_VARIABLE,
    StorageURLError,
    masked_url,
    open_storage,
    resolve_storage_url,
    store_files,
)
from trainers.naming import unknown_name_message
from trainers.outputs import REPORTS_DIR, write_atomically


def _load(storage, storage_url: str, name: str) -> optuna.Study:
    names = [summary.study_name for summary in optuna.get_all_study_summaries(storage)]
    if name not in names:
        raise LookupError(f"{unknown_name_message('study', name, names)} (in {masked_url(storage_url)})")
    return optuna.load_study(study_name=name, storage=storage)


def build_parser() -> argparse.ArgumentParser:
    """The command line; every option shows its default."""
    parser = argparse.ArgumentParser(
        prog="python -m reports", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("studies", nargs="+", metavar="STUDY", help="a study name, or 'compare' followed by several")
    parser.add_argument(
        "--storage", help=f"Optuna storage URL, or env:NAME (default: ${STORAGE_URL_VARIABLE}, else {DEFAULT_STORAGE_URL})"
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
    return parser


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    os.umask(0o077)  # reports describe a store: their owner's alone
    parser = build_parser()
    args = parser.parse_args(argv)
    comparing = args.studies[0] == "compare"
    names = args.studies[1:] if comparing else args.studies
    if comparing and len(names) < 2:
        parser.error("compare needs at least two study names")
    if not comparing and len(names) != 1:
        parser.error("give one study name, or 'compare' and several")
    output = args.output or (REPORTS_DIR / "compare.html" if comparing else report_path(names[0]))
    try:
        url = resolve_storage_url(args.storage)
        check_writable_file(output, "-o", keep=store_files(url))
        if args.png:
            check_writable_dir(args.png, "--png")
        storage = open_storage(url, read_only=True)
        studies = [_load(storage, url, name) for name in names]
    except (StorageURLError, LookupError, OutputPathError) as error:
        parser.error(str(error))
    try:
        if comparing:
            path = write_atomically(output, compare_html(studies, plotlyjs=args.plotlyjs))
        else:
            page, figures = report_html(studies[0], url, plotlyjs=args.plotlyjs)
            path = write_atomically(output, page)
            if args.png:
                print(write_images(figures, args.png))
    except OSError as error:  # a full disk, say: write_atomically left no partial file
        parser.error(f"cannot write {error.filename or output}: {error.strerror or error}; free space there, or pass another -o")
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
