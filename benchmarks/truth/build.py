"""Build (or resume) a study's truth table through the product's own engine, and commit-ready.

    python -m benchmarks.truth.build                      # lra_sharing's table: about 6 hours on 2 cores
    python -m benchmarks.truth.build --export             # write what the store holds so far, train nothing

The table preset (``--preset table``, ``Preset.exhaustive_seeds``) runs as any study does: Ray Tune
trains its trials and the Optuna store records them. Before it runs, the rows already in the
committed table (``benchmarks/truth/<study>.csv``) that the store lacks are added to the store as
the complete trials they were, so a build resumes from the committed file on a machine that never
held the store; after it (and with ``--export`` at any time, beside a running build) the store's
rows are written back to the file, merged with the rows it held. Stopping the build (Ctrl-C) loses
at most the trials it was training: re-running the same command trains the rest.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from benchmarks.truth.table import (
    COSTS,
    CURVE_PREFIX,
    FINISHED_ATTRIBUTE,
    METRICS,
    TABLE_PRESET,
    Table,
    load,
    provenance_of,
    rows_of,
    study_with_table,
    table_path,
    write,
)
from common.naming import UnknownNameError
from common.outputs import exit_with
from storage import StorageURLError, StoreBusyError, open_storage, record, resolve_storage_url
from studies.catalogue.schema import Study
from studies.engine.study_space import preset_space

IMPORTED_ATTRIBUTE = "imported_from_table"  # user attribute of a trial added from the committed table


def command(study: str) -> str:
    """The command that builds and resumes ``study``'s table."""
    return "python -m benchmarks.truth.build" + ("" if study == "lra_sharing" else f" --study {study}")


def import_rows(optuna_study: optuna.Study, definition: Study, table: Table) -> int:
    """Add the table's rows that the store lacks as the complete trials they were.

    Args:
        optuna_study: The table preset's study (created if new).
        definition: The study definition (its families and named points).
        table: The committed table.

    Returns:
        How many trials were added.
    """
    space = preset_space(definition, definition.preset(TABLE_PRESET))
    held = {table.configuration_of(row) + (row[record.SEED_INDEX],) for row in rows_of(optuna_study).to_dict("records")}
    points = {point.label: point for point in definition.points}
    added = 0
    for row in table.rows.to_dict("records"):
        if table.configuration_of(row) + (row[record.SEED_INDEX],) in held:
            continue
        point = points.get(row[record.POINT]) if row[record.POINT] else None
        own = set(point.values) if point else set()
        params = {name: row[name] for name in table.knobs if row[name] is not None and name not in own}
        attributes: dict[str, Any] = {
            record.FAMILY: row[record.FAMILY],
            "baseline": bool(row["baseline"]),
            record.SEED_INDEX: int(row[record.SEED_INDEX]),
            "seed": int(row["seed"]),
            IMPORTED_ATTRIBUTE: table_path(optuna_study.study_name).name,
            FINISHED_ATTRIBUTE: row["finished"],
            record.CODE_VERSION: row[record.CODE_VERSION],
        } | {name: row[name] for name in (*METRICS[1:], *COSTS)}
        if point is not None:
            attributes |= {record.POINT: point.label, record.POINT_VALUES: dict(point.values)}
        curve = {
            int(name.removeprefix(CURVE_PREFIX)): float(value) for name, value in row.items() if name.startswith(CURVE_PREFIX)
        }
        optuna_study.add_trial(
            optuna.trial.create_trial(
                state=TrialState.COMPLETE,
                params=params,
                distributions={name: CategoricalDistribution(space.knobs[name].domain.values) for name in params},
                values=[float(row[record.ACCURACY]), float(row[record.FLOPS])],
                intermediate_values=curve,
                user_attrs={name: _plain(value) for name, value in attributes.items() if not _missing(value)},
            )
        )
        added += 1
    return added


def export(optuna_study: optuna.Study, path: Path, study: str) -> int:
    """Write the store's rows to the table, merged with the rows the file already held.

    Returns:
        The table's number of rows.
    """
    rows = rows_of(optuna_study)
    if path.exists():
        held = load(path)
        rows = pd.concat([held.rows, rows], ignore_index=True)
    key = [record.FAMILY, record.POINT, *optuna_study.user_attrs.get(record.SEARCH_SPACE, {}), record.SEED_INDEX]
    rows = rows.drop_duplicates(subset=key, keep="first").sort_values(["finished", record.SEED_INDEX], kind="stable")
    write(rows, provenance_of(optuna_study, rows, command(study)), path)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.truth.build", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--study", default="lra_sharing", help="a study with a table preset (default: lra_sharing)")
    parser.add_argument("--storage", help="the store the table trains in (default: the product's, runs/optuna.db)")
    parser.add_argument("--export", action="store_true", help="write the store's rows to the table; train nothing")
    args = parser.parse_args(argv)
    try:
        definition, path = study_with_table(args.study)
        url = resolve_storage_url(args.storage)
        # --export reads the store (beside a running build, which holds SQLite's one writer's place)
        storage = open_storage(url, read_only=args.export)
    except (UnknownNameError, StorageURLError, StoreBusyError) as error:
        parser.error(str(error))
    name = definition.store_name(TABLE_PRESET)
    if args.export:
        names = {summary.study_name for summary in optuna.get_all_study_summaries(storage)}
        optuna_study = optuna.load_study(study_name=name, storage=storage) if name in names else None
        if (optuna_study is None or not rows_of(optuna_study).shape[0]) and not path.exists():
            print(f"error: the store holds no trial of {name} yet: run {command(args.study)} first", file=sys.stderr)
            return 2
        print(f"{path}: {export(optuna_study, path, args.study) if optuna_study else len(load(path).rows)} rows")
        return 0
    optuna_study = optuna.create_study(
        study_name=name, storage=storage, directions=[o.direction for o in definition.objectives], load_if_exists=True
    )
    if path.exists() and (added := import_rows(optuna_study, definition, load(path))):
        print(f"{added} trials added to the store from {path}")
    from studies.run import main as run  # the product's own command, on the same store

    code = run([args.study, "--preset", TABLE_PRESET, "--storage", url])
    print(f"{path}: {export(optuna_study, path, args.study)} rows")
    return code


def _missing(value: Any) -> bool:
    """An empty cell: a value the trial never recorded."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _plain(value: Any) -> Any:
    """A pandas or numpy scalar as the Python value Optuna's JSON attributes take."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value.item() if hasattr(value, "item") else value


if __name__ == "__main__":
    exit_with(main)
