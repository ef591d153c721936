"""Results: a study's store turned into the trial frame and everything derived from it.

``StudyResults.read`` reads a store once; the engine (repeat planning, the stored verdict),
the summary, the reports and the benchmarks all take what they need from it:

    names          the frame's own columns and keys (the store's names are ``storage.record``'s)
    quality        what the first objective measures and how it is shown
    frame          store -> one row per trial (``trials_frame``)
    fronts         Pareto fronts, each family's best, its budget
    statistics     t-intervals for a handful of seeds
    configurations trials grouped by configuration, mean over seeds
    verdict        the study's answer in one sentence
    details        learning curves, knob importances, provenance
"""

from __future__ import annotations

from dataclasses import dataclass

import optuna
import pandas as pd

from studies.results.configurations import configurations
from studies.results.frame import knob_columns, trials_frame
from studies.results.verdict import Headline, headline


@dataclass(frozen=True)
class StudyResults:
    """One read of a study's trials, and what every view of them derives from it.

    Attributes:
        frame: ``trials_frame``: one row per started trial.
        configurations: Its complete trials grouped by configuration (``configurations``).
        verdict: The study's answer (``verdict.headline``).
    """

    frame: pd.DataFrame
    configurations: pd.DataFrame
    verdict: Headline

    @classmethod
    def read(cls, optuna_study: optuna.Study) -> StudyResults:
        """Read ``optuna_study``'s trials once and derive the configurations and the verdict."""
        frame = trials_frame(optuna_study)
        configs = configurations(frame, knob_columns(frame))
        return cls(frame, configs, headline(frame, configs))
