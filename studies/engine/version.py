"""The code version recorded with every trial."""

from __future__ import annotations

import importlib.metadata
import subprocess
from functools import cache
from pathlib import Path


@cache
def code_version() -> str:
    """``<package version>+<git commit>[.dirty]`` inside a git checkout, else the package version."""
    try:
        version = importlib.metadata.version("damcha-studies")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return version
    return f"{version}+{commit}" + (".dirty" if dirty else "")
