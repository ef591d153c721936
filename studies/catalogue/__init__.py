"""The catalogue: every study and suite by name, as data (one module per study; the schema in ``schema``).

Nothing here runs anything: ``studies.engine`` runs a study, ``python -m studies.run`` is the command.
"""

from __future__ import annotations

from common.naming import lookup
from studies.catalogue.cross_head import CROSS_HEAD
from studies.catalogue.lm_rank import LM_RANK
from studies.catalogue.lra_sharing import LRA_SHARING
from studies.catalogue.lra_suite import LRA_SUITE
from studies.catalogue.recall_heads import RECALL_HEADS
from studies.catalogue.schema import Study, Suite

STUDIES: dict[str, Study] = {study.name: study for study in (LRA_SHARING, CROSS_HEAD, RECALL_HEADS, LM_RANK)}
SUITES: dict[str, Suite] = {LRA_SUITE.name: LRA_SUITE}


def get_study(name: str) -> Study:
    """A study by name.

    Raises:
        common.naming.UnknownNameError: "did you mean ..., available: ...".
    """
    return lookup(STUDIES, name, "study")


def get_runnable(name: str) -> Study | Suite:
    """A study or a suite by name: what ``python -m studies.run NAME`` runs.

    Raises:
        common.naming.UnknownNameError: "did you mean ..., available: ...".
    """
    return lookup({**STUDIES, **SUITES}, name, "study")
