"""The error every check of a run's options raises, in a module of its own: the checks that run before torch
and Ray are imported (``studies.engine.ray_address``) raise it too."""

from __future__ import annotations


class StudyOptionError(ValueError):
    """An option that cannot be run; the message names it and the fix."""
