"""Command lines the tests run as a user would."""

from __future__ import annotations

import sys


def smoke_study_command(*options: str) -> list[str]:
    """``python -m studies.run lra_sharing --preset smoke`` with ``options``, in this interpreter."""
    return [sys.executable, "-m", "studies.run", "lra_sharing", "--preset", "smoke", *options]
