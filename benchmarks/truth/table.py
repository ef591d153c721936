"""The truth table as data: every configuration of a study's space trained on several seeds, one CSV
row per trial, with its provenance beside it in JSON.

A table is written from the store of an exhaustive preset (``Preset.exhaustive_seeds``: ``python -m
studies.run lra_sharing --preset table``) and read back by ``load``. It is a benchmark in its own
right: a sampler can be tested on it without training anything (``benchmarks.truth.replay``). The
columns (``docs/truth.md`` says the same for readers):

- ``family``, ``baseline``, ``point``: the attention family's label; whether it is the baseline the
  others are judged against (MHA); the named point the trial trains, or empty.
- the knob columns (``Table.knobs``: ``attention``, ``metric_mode``, ``d_model``, ...): the
  configuration, a named point's own values included; empty where a knob does not exist (MHA has
  no metric rank).
- ``seed_index``, ``seed``: which of the configuration's runs (0, 1, 2), and the seed it trained on;
  run ``i`` of every configuration trains on the same seed (initial weights and batch order).
- ``val_accuracy_at_<step>``: validation accuracy after each evaluation (the learning curve).
- ``val_accuracy``, ``test_accuracy``: after the last step, on the validation split (what a study
  selects on) and on the held-out test split (what its verdict judges on); ``val_loss``,
  ``test_loss``, ``train_loss``.
- ``flops_per_example`` (analytic forward FLOPs), ``parameters``, ``attention_parameters``,
  ``peak_memory_bytes``, ``examples_per_s``, ``wall_seconds`` (the whole run, evaluations
  included, on one CPU thread with another trial beside it), ``device``.
- ``code_version``, ``finished``: the code that trained it and when it finished (UTC).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from optuna.trial import TrialState

from common.naming import UnknownNameError
from common.outputs import write_atomically
from search_space.space import Value
from storage import record
from studies.catalogue import STUDIES, get_study
from studies.catalogue.schema import Study
from studies.results.frame import configuration
from studies.run import parse_knob_value

TABLES_DIR = Path(__file__).resolve().parent
TABLE_PRESET = "table"  # the preset that trains a study's table (``Preset.exhaustive_seeds``)
CURVE_PREFIX = "val_accuracy_at_"
FINISHED_ATTRIBUTE = "table_finished"  # user attribute: when a trial added from a table first finished
METRICS = (record.ACCURACY, record.TEST_ACCURACY, record.VAL_LOSS, record.TEST_LOSS, record.TRAIN_LOSS)
REQUIRED = (record.ACCURACY, record.TEST_ACCURACY, record.FLOPS, record.WALL_SECONDS)  # cells every row must hold
COSTS = (
    record.FLOPS,
    "parameters",
    record.ATTENTION_PARAMETERS,
    record.PEAK_MEMORY_BYTES,
    record.EXAMPLES_PER_S,
    record.WALL_SECONDS,
    "device",
)
TEXT_COLUMNS = (record.FAMILY, "device", record.CODE_VERSION, "finished")
PACKAGES = ("torch", "optuna", "ray", "numpy", "pandas", "datasets", "damcha-studies")


class TableError(ValueError):
    """A table file that cannot be read as one; the message names the file and what is wrong."""


def read_csv_checked(path: Path, columns: tuple[str, ...], what: str, fix: str) -> pd.DataFrame:
    """A benchmark's committed CSV file, parsed and with every column it needs.

    Args:
        path: The file.
        columns: The columns its reader needs.
        what: What the file is, for the message ("a replays file").
        fix: How to mend it, for the message.

    Raises:
        TableError: not a CSV (cut short, undecodable, empty) or a column missing, named by the file.
    """
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise TableError(f"{path}: not {what} ({error}); {fix}") from None
    if missing := [column for column in columns if column not in frame.columns]:
        raise TableError(f"{path}: no column {', '.join(dict.fromkeys(missing))}; {fix}")
    return frame


@dataclass(frozen=True)
class Table:
    """A truth table: its rows (one per trained trial) and its provenance.

    Attributes:
        rows: One row per trial (the module's columns).
        provenance: The study, preset, space, seeds, training settings, code, packages and machine.
    """

    rows: pd.DataFrame
    provenance: Mapping[str, Any]

    @property
    def knobs(self) -> list[str]:
        """The knob columns, in the study's sampling order."""
        return list(self.provenance["knobs"])

    @property
    def curve_steps(self) -> list[int]:
        """The steps of the learning-curve columns."""
        return sorted(int(column.removeprefix(CURVE_PREFIX)) for column in self.rows if column.startswith(CURVE_PREFIX))

    def configuration_of(self, row: Mapping[str, Any]) -> tuple:
        """A row's configuration as a hashable key: its family, point and knob values."""
        return (row[record.FAMILY], row[record.POINT], *(row[name] for name in self.knobs))


def table_path(store_name: str) -> Path:
    """Where the table of a store's study is committed: ``benchmarks/truth/<study name>.csv``."""
    return TABLES_DIR / f"{store_name}.csv"


def study_with_table(name: str) -> tuple[Study, Path]:
    """A study that has a table preset, and where its table is committed.

    Args:
        name: The study's name (``python -m studies.run --list``).

    Returns:
        The study's definition and its table's path (which need not exist yet).

    Raises:
        UnknownNameError: no such study, or it has no table preset (the message names those that do).
    """
    definition = get_study(name)
    if TABLE_PRESET not in definition.presets:
        with_tables = [study for study in STUDIES if TABLE_PRESET in STUDIES[study].presets]
        raise UnknownNameError(f"study {name!r} has no table preset; studies with one: {', '.join(with_tables)}")
    return definition, table_path(definition.store_name(TABLE_PRESET))


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """``--study`` and ``--table``: the commands that read a truth table read the one a study commits, or a file."""
    parser.add_argument("--study", default="lra_sharing", help="a study with a table: its committed table (default: lra_sharing)")
    parser.add_argument("--table", type=Path, help="a table file instead of the study's (its .json beside it)")


def chosen_table(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Study, Path]:
    """The study ``add_table_arguments``' options name, and the table they choose (``--table``, else the study's).

    A ``--study`` that names no study with a table preset is the parser's error (exit 2, the usage and the
    studies that have one).
    """
    try:
        definition, committed = study_with_table(args.study)
    except UnknownNameError as error:
        parser.error(str(error))
    return definition, args.table or committed


def rows_of(study: optuna.Study) -> pd.DataFrame:
    """The table rows of an exhaustive preset's study: its trials that trained to the end.

    Args:
        study: An Optuna study whose trials carry ``seed_index`` (``Preset.exhaustive_seeds``).

    Returns:
        One row per complete trial, ordered by trial number; running, failed and infeasible
        trials are not results and are left out. A trial added from a table keeps the time it
        first finished (Optuna stamps the time it was added).
    """
    knobs = list(study.user_attrs.get(record.SEARCH_SPACE, {}))
    rows = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        attributes = trial.user_attrs
        if record.SEED_INDEX not in attributes or record.INFEASIBLE in attributes:
            continue
        values = configuration(trial)
        row = {
            record.FAMILY: attributes.get(record.FAMILY),
            "baseline": bool(attributes.get("baseline")),
            record.POINT: attributes.get(record.POINT),
        }
        row |= {name: values.get(name) for name in knobs}
        row |= {record.SEED_INDEX: attributes[record.SEED_INDEX], "seed": attributes.get("seed")}
        row |= {f"{CURVE_PREFIX}{step}": value for step, value in sorted(trial.intermediate_values.items())}
        row |= {record.ACCURACY: trial.values[0]} | {name: attributes.get(name) for name in METRICS[1:] + COSTS}
        finished = attributes.get(FINISHED_ATTRIBUTE) or trial.datetime_complete.replace(tzinfo=UTC).isoformat(timespec="seconds")
        row |= {record.CODE_VERSION: attributes.get(record.CODE_VERSION), "finished": finished}
        rows.append(row)
    frame = pd.DataFrame(rows)
    for name in (record.POINT, *knobs):  # knob values keep their types (4, not 4.0; "full"); absent ones are None
        if name in frame:
            frame[name] = pd.Series([row[name] for row in rows], index=frame.index, dtype=object)
    return frame


def provenance_of(study: optuna.Study, rows: pd.DataFrame, command: str) -> dict[str, Any]:
    """What a table was made from and on: the study's settings, the code and packages, the machine.

    Args:
        study: The exhaustive preset's study.
        rows: Its rows (``rows_of``).
        command: The command that builds (and resumes) the table.
    """
    attributes = study.user_attrs
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "study": study.study_name,
        "command": command,
        "question": attributes.get("question"),
        "preset": attributes.get("preset"),
        "task": attributes.get("task"),
        record.BUDGET: attributes.get(record.BUDGET),
        record.SEARCH_SPACE: attributes.get(record.SEARCH_SPACE),
        "knobs": list(attributes.get(record.SEARCH_SPACE, {})),
        "seeds": "run i of every configuration trains on seed 80000 + i (--seed 0)",
        "rows": len(rows),
        "code_versions": sorted(set(rows[record.CODE_VERSION].dropna())) if len(rows) else [],
        "first_finished": rows["finished"].min() if len(rows) else None,
        "last_finished": rows["finished"].max() if len(rows) else None,
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
        "packages": versions,
        "python": platform.python_version(),
        "machine": {"platform": platform.platform(), "processor": _processor(), "cpus": os.cpu_count()},
    }


def write(rows: pd.DataFrame, provenance: Mapping[str, Any], path: Path) -> None:
    """Write a table and its provenance (``path`` with ``.json``), each file whole or not at all."""
    write_atomically(path, rows.to_csv(index=False))
    write_atomically(path.with_suffix(".json"), json.dumps(provenance, indent=2, default=str) + "\n")


def load(path: Path) -> Table:
    """Read a table and its provenance.

    Args:
        path: The CSV file (its provenance is the ``.json`` beside it).

    Raises:
        TableError: a missing file, or one without the columns of a table.
    """
    try:
        provenance = json.loads(path.with_suffix(".json").read_text())
        rows = pd.read_csv(path, dtype=str, keep_default_na=False)  # every cell as written; typed below
    except (OSError, ValueError) as error:
        raise TableError(f"cannot read the table {path}: {error}") from None
    if not isinstance(provenance, dict) or not isinstance(provenance.get("knobs"), list):
        raise TableError(f"{path.with_suffix('.json')} is not a table's provenance: it lists no knobs (write it with --export)")
    knobs = provenance["knobs"]
    missing = [
        name for name in (record.FAMILY, "baseline", record.POINT, record.SEED_INDEX, *knobs, *REQUIRED) if name not in rows
    ]
    if missing:
        raise TableError(f"{path} is not a truth table: it has no column {', '.join(missing)}")
    for name in rows:
        if name == "baseline":
            rows[name] = rows[name] == "True"
        elif name in (record.POINT, *knobs):  # knob values keep their types: 4, 1e-3, "full"; None where absent
            rows[name] = pd.Series([_value(cell) for cell in rows[name]], index=rows.index, dtype=object)
        elif name in TEXT_COLUMNS:
            rows[name] = pd.Series([cell or None for cell in rows[name]], index=rows.index, dtype=object)
        else:
            try:
                rows[name] = pd.to_numeric(rows[name].replace("", None))
            except ValueError as error:
                raise TableError(f"{path}: column {name!r} holds a value that is not a number ({error})") from None
    _check_cells(rows, path)
    return Table(rows, provenance)


def _check_cells(rows: pd.DataFrame, path: Path) -> None:
    """Every row holds what the truth and its replays read: its family, seed, final accuracies, cost, time
    and learning curve, as numbers in their ranges (a row cut short would print NaN as a result).

    Raises:
        TableError: the first row that does not, by its line in the file.
    """
    curve = [name for name in rows if name.startswith(CURVE_PREFIX)]
    for name in (record.FAMILY, record.SEED_INDEX, *REQUIRED, *curve):
        empty = rows[name].isna()
        if empty.any():
            line = int(empty.idxmax()) + 2  # the header is line 1
            raise TableError(
                f"{path}, line {line}: no {name!r} (a row cut short?); remove the row, or write the table again "
                "from its store (python -m benchmarks.truth.build --export)"
            )
    ranges = [(name, 0, 1) for name in (*METRICS[:2], *curve)]
    ranges += [(record.FLOPS, 1, math.inf), (record.WALL_SECONDS, 0, math.inf)]
    for name, low, high in ranges:
        values = rows[name]
        bad = ~values.between(low, high)
        if bad.any():
            line = int(bad.idxmax()) + 2
            raise TableError(f"{path}, line {line}: {name} = {values[bad].iloc[0]} lies outside [{low}, {high}]")
    seeds = rows[record.SEED_INDEX]
    if ((seeds < 0) | (seeds != seeds.round())).any():
        line = int(((seeds < 0) | (seeds != seeds.round())).idxmax()) + 2
        raise TableError(f"{path}, line {line}: seed_index must be a whole number from 0, got {seeds[line - 2]}")


def _value(cell: str) -> Value | None:
    """A CSV cell as the knob value it was written from (None when empty), read as ``--fix`` reads one."""
    return None if cell == "" else parse_knob_value(cell)


def _processor() -> str:
    """The CPU model (``/proc/cpuinfo``'s model name where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
