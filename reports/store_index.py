"""What a store holds, and which study a short name means.

A run's study is named ``<study>-<preset>-v<version>`` (``lra_sharing-quick-v6``), with the
knobs it fixes after it. ``lra_sharing`` then means the newest version of lra_sharing's
default preset in the store, or of the one preset the store holds of it, ``lra_sharing-smoke`` the
newest version of its smoke preset;
a short name that could mean two studies is refused, naming both.
"""

from __future__ import annotations

import re
from collections import Counter

import optuna
import pandas as pd

from common.naming import unknown_name_message
from reports.tables import verdict_text
from storage import masked_url, record
from storage.repeats_study import complete_repeats, is_repeats_study, trials_with_repeats
from studies.results.frame import family_of, outcome
from studies.results.names import INFEASIBLE

_PLAIN = re.compile(r"^(?P<study>[^-]+)-(?P<preset>[^-]+)-v(?P<version>\d+)$")  # no --fix, no --fresh


class AmbiguousNameError(LookupError):
    """A short study name that names studies of more than one preset."""


def resolve_study_name(wanted: str, summaries: list[optuna.study.StudySummary], storage_url: str) -> str:
    """The store's study that ``wanted`` names: itself, or the newest version a short name means.

    Args:
        wanted: A whole study name, a study (``lra_sharing``) or a study and preset (``lra_sharing-smoke``).
        summaries: The store's studies (``optuna.get_all_study_summaries``).
        storage_url: The store, for the messages (shown masked).

    Returns:
        A study name in the store.

    Raises:
        LookupError: nothing in the store matches (the closest names offered).
        AmbiguousNameError: the short name matches studies of more than one preset (each named).
    """
    for summary in summaries:
        if summary.study_name == wanted and is_repeats_study(summary.user_attrs):
            search = summary.user_attrs[record.SEARCH_STUDY]
            raise LookupError(f"study {wanted!r} holds the seed repeats of {search!r}, whose report shows them: name {search!r}")
    names = [summary.study_name for summary in summaries if not is_repeats_study(summary.user_attrs)]
    if wanted in names:
        return wanted
    matches = []
    for summary in summaries:
        parts = _PLAIN.match(summary.study_name)
        if parts and wanted in (parts["study"], f"{parts['study']}-{parts['preset']}"):
            matches.append((parts["preset"], int(parts["version"]), summary))
    where = f"(in {masked_url(storage_url)})"
    if not matches:
        raise LookupError(f"{unknown_name_message('study', wanted, names)} {where}")
    presets = {preset for preset, _, _ in matches}
    if len(presets) > 1:  # a bare study name: its default preset, when a run recorded which that is
        default = {p for p, _, s in matches if s.user_attrs.get(record.DEFAULT_PRESET) is True}
        if len(default) != 1:
            choices = " or ".join(sorted({s.study_name for _, _, s in matches}))
            raise AmbiguousNameError(f"study name {wanted!r} is ambiguous {where}: it could be {choices}; give the whole name")
        presets = default
    newest = max((m for m in matches if m[0] in presets), key=lambda match: match[1])
    return newest[2].study_name


def _counts(counter: Counter, order: tuple[str, ...]) -> str:
    """``12 complete, 3 pruned``: the counter's keys in ``order`` first, then any others; zeros left out."""
    keys = [key for key in order if counter[key]] + sorted(key for key in counter if key not in order)
    return ", ".join(f"{counter[key]} {key.lower()}" for key in keys)


_STATES = ("COMPLETE", "PRUNED", "FAIL", INFEASIBLE, "RUNNING", "WAITING")  # outcomes, in the order listed


def _studies(storage: optuna.storages.BaseStorage) -> list[tuple[optuna.study.StudySummary, dict[str, Counter], int]]:
    """The store's studies by name, each with its trials' outcomes counted by family, its seed repeats' included
    (a study of seed repeats is listed within its search's, not on its own), and its complete seed repeats."""
    summaries = sorted(optuna.get_all_study_summaries(storage), key=lambda summary: summary.study_name)
    counted = []
    for summary in summaries:
        if is_repeats_study(summary.user_attrs):
            continue
        families: dict[str, Counter] = {}
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        trials = trials_with_repeats(study)
        for trial in trials:
            families.setdefault(family_of(trial), Counter())[outcome(trial)] += 1
        counted.append((summary, families, complete_repeats(trials)))
    return counted


def listing(storage: optuna.storages.BaseStorage, storage_url: str) -> str:
    """The store's studies, one block each: trials by state and by family, the recorded verdict and how sure it is.

    Args:
        storage: The store, opened for reading.
        storage_url: Its URL, shown masked.
    """
    studies = _studies(storage)
    lines = [f"{masked_url(storage_url)}: {len(studies)} {'study' if len(studies) == 1 else 'studies'}"]
    for summary, families, repeats in studies:
        states = sum(families.values(), Counter())
        total = sum(states.values())
        lines.append(f"\n{summary.study_name}: {total} trials" + (f" ({_counts(states, _STATES)})" if total else ""))
        for family, counted in families.items():
            lines.append(f"  {family}: {sum(counted.values())} ({_counts(counted, _STATES)})")
        verdict = summary.user_attrs.get(record.VERDICT)
        if not verdict:
            lines.append("  verdict: none recorded (the run has not finished)")
            continue
        read, now = summary.user_attrs.get(record.VERDICT_REPEATS), repeats
        if read is not None and read != now:  # repeats were added, or deleted, since it was written
            lines.append(
                f"  verdict (stale: it read {read} seed repeats, the store holds {now} now; "
                f"python -m reports {summary.study_name} recomputes it):"
            )
        else:
            lines.append("  verdict:")
        if note := summary.user_attrs.get(record.VERDICT_PROVISIONAL):  # other drivers' trials ran when it was written
            lines.append(f"    {note}")
        if table := verdict_text(summary.user_attrs.get(record.VERDICT_TABLE) or [], indent="    "):  # older stores: none
            lines.append(table)
        lines.append(f"    {verdict}")
        if reliability := summary.user_attrs.get(record.RELIABILITY):
            lines.append(f"    {reliability}")
    return "\n".join(lines)


def listing_data(storage: optuna.storages.BaseStorage) -> pd.DataFrame:
    """``listing`` as data: one row per study and family, its trials counted by outcome (a column each, numbers),
    the study's recorded verdict and how sure it is (``how_sure``; empty when none); a study without trials has
    one row, family empty.

    Args:
        storage: The store, opened for reading.
    """
    rows = []
    for summary, families, _ in _studies(storage):
        verdict = summary.user_attrs.get(record.VERDICT) or ""
        for family, counted in families.items() or [("", Counter())]:
            outcomes = {state.lower(): counted[state] for state in _STATES}
            row = {"study": summary.study_name, record.FAMILY: family, "trials": sum(counted.values())}
            rows.append(row | outcomes | {"verdict": verdict, "how_sure": summary.user_attrs.get(record.RELIABILITY) or ""})
    columns = ["study", record.FAMILY, "trials", *(state.lower() for state in _STATES), "verdict", "how_sure"]
    return pd.DataFrame(rows, columns=columns)
