"""What a study's next searched trial is: an exhaustive table's next entry, or the family whose turn it is
(its named point first); and the trials of a family that early stopping judges a trial among."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import optuna
from optuna.trial import TrialState

from search_space.space import SearchSpaceError
from storage import record
from studies.catalogue.schema import Family, NamedPoint, Study
from studies.engine.queue import COUNTED_STATES, MAX_RETRIES, PlannedTrial
from studies.engine.study_space import GridEntry
from studies.results.frame import configuration_key

FORBIDDEN = "forbidden combination"  # why a sampled configuration that the study's rules refuse is infeasible


def next_table_entry(study: optuna.Study, grid: Sequence[GridEntry], searched: tuple[str, ...]) -> GridEntry | None:
    """The first table entry (``study_space.exhaustive_grid``) that no trial of the store trains or trained,
    or None. A trial counts for its entry unless it failed with a retry to come."""
    trained: Counter = Counter()
    for trial in study.get_trials(deepcopy=False):
        index = trial.user_attrs.get(record.SEED_INDEX)
        if index is not None and (trial.state != TrialState.FAIL or int(trial.user_attrs.get(record.ATTEMPT, 0)) >= MAX_RETRIES):
            trained[(trial.user_attrs.get(record.POINT), configuration_key(trial.params), index)] += 1
    for entry in grid:
        key = (entry.point and entry.point.label, configuration_key(entry.params(searched)), entry.seed_index)
        if trained[key]:
            trained[key] -= 1
        else:
            return entry
    return None


def with_point_due(study: optuna.Study, points: Sequence[NamedPoint], planned: PlannedTrial) -> PlannedTrial:
    """``planned`` as its family's named point when no trial of the store has trained that point
    yet (a failed one's retry is queued with it); else as it is."""
    asked = {trial.user_attrs.get(record.POINT) for trial in study.get_trials(deepcopy=False)}
    for point in points:
        if point.family == planned.family and point.label not in asked:
            return replace(planned, point=point.label, point_values=point.values)
    return planned


def next_family(study: optuna.Study, families: Sequence[Family]) -> Family:
    """The family with the fewest trials so far (all drivers'; the first on ties): the budget splits evenly.

    Finished, running and queued trials count, a diverged or out-of-memory one too;
    seed repeats, failed trials (a retry is queued) and combinations rejected before
    training don't.
    """
    trials = study.get_trials(deepcopy=False, states=COUNTED_STATES)
    asked = Counter(
        t.user_attrs.get(record.FAMILY)
        for t in trials
        if record.REPEAT_OF not in t.user_attrs and t.user_attrs.get(record.INFEASIBLE) != FORBIDDEN
    )
    return min(families, key=lambda family: asked[family.label])


def next_planned(study: optuna.Study, definition: Study, grid: Sequence[GridEntry], searched: tuple[str, ...]) -> PlannedTrial:
    """The next searched trial: an exhaustive preset's next table entry (``next_table_entry``), else the next
    family's trial (its named point, the first time) for the sampler to fill in.

    Args:
        study: The Optuna study.
        definition: The study's definition (its families and named points).
        grid: An exhaustive preset's table (``study_space.table_grid``), or empty.
        searched: The space's searched knobs.

    Raises:
        SearchSpaceError: the table is whole, yet a trial was asked.
    """
    if grid:
        entry = next_table_entry(study, grid, searched)
        if entry is None:  # every entry trained: the resamples of a rejected last one end here
            raise SearchSpaceError("the exhaustive table is whole, but a trial was asked")
        point = entry.point
        return PlannedTrial(
            params=entry.params(searched),
            family=entry.family.label,
            baseline=entry.family.baseline,
            point=point and point.label,
            point_values=point and point.values,
            seed_index=entry.seed_index,
        )
    family = next_family(study, definition.families)
    return with_point_due(
        study, definition.points, PlannedTrial(params=family.values, family=family.label, baseline=family.baseline)
    )
