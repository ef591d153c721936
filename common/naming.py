"""Lookup of names in literal registries, with "did you mean" errors.

A leaf every package may import: studies, knobs, attention variants and reports all
look names up the same way.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A name that is not in a registry; ``str()`` gives the readable message."""

    def __str__(self) -> str:
        return str(self.args[0])


def unknown_name_message(kind: str, name: str, available: list[str] | tuple[str, ...]) -> str:
    """Explain that ``name`` is not one of ``available``, suggesting the closest names.

    Args:
        kind: What is being looked up, e.g. ``"attention"`` or ``"study"``.
        name: The name that was asked for.
        available: The names that exist.

    Returns:
        A one-line message such as ``unknown attention 'damch': did you mean 'damcha'? available: damcha, mha``.
    """
    close = difflib.get_close_matches(name, available, n=3, cutoff=0.6)
    hint = f" did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} {name!r}:{hint} available: {', '.join(sorted(available))}"


def lookup(registry: Mapping[str, T], name: str, kind: str) -> T:
    """Return ``registry[name]``.

    Args:
        registry: The literal registry.
        name: The name to look up.
        kind: What the registry holds, used in the error message.

    Returns:
        The registered entry.

    Raises:
        UnknownNameError: ``name`` is not registered; the message suggests the closest names.
    """
    try:
        return registry[name]
    except KeyError:
        raise UnknownNameError(unknown_name_message(kind, name, list(registry))) from None
