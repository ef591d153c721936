"""Declarative search spaces over DAMCHA knobs.

Knob names are the fields of ``trainers.config.ModelConfig`` and
``trainers.train.TrainConfig``: one flat name is the config field, the Optuna parameter
and the report column. ``knobs.KNOBS`` holds every knob with its full domain and
condition, ``knobs.RULES`` the forbidden combinations; ``space.SearchSpace`` samples
them define-by-run and checks any configuration.
"""

from search_space.knobs import KNOBS, RULES
from search_space.space import Choice, Knob, Range, Rule, SearchSpace, SearchSpaceError

__all__ = ["KNOBS", "RULES", "Choice", "Knob", "Range", "Rule", "SearchSpace", "SearchSpaceError"]
