"""The store's vocabulary has one home: no product module names a store field by a string literal."""

from __future__ import annotations

import ast
from pathlib import Path

from storage import record

ROOT = Path(__file__).resolve().parents[2]
# The packages that write or read the store; ``trainers`` knows no store (its report keys are its own,
# checked against ``record.REPORTED`` in tests/trainers/test_train.py) and the catalogue is data.
READERS_AND_WRITERS = ("studies/engine", "reports", "storage", "common", "search_space", "benchmarks")
NAMES = {name: value for name, value in vars(record).items() if name.isupper() and isinstance(value, str)}
FIELDS = set(NAMES.values())
COMMON_WORDS = {
    "seed",
    "error",
    "device",
    "task",
    "preset",
    "parameters",
    "command",
    "question",
    "verdict",
    "baseline",
    "objectives",
}
# Names no other vocabulary shares: a literal of one anywhere is a store field spelled twice.
DISTINCTIVE = FIELDS - COMMON_WORDS


def _attribute_access_key(node: ast.AST) -> ast.AST | None:
    """The key of ``x.user_attrs[key]``, ``x.user_attrs.get(key)``, ``x.set_user_attr(key, ...)`` or ``key in x.user_attrs``."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "user_attrs":
        return node.slice
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        holder = node.func.value
        if node.func.attr == "set_user_attr" or (
            node.func.attr == "get" and isinstance(holder, ast.Attribute) and holder.attr == "user_attrs"
        ):
            return node.args[0]
    if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
        container = node.comparators[0]
        if isinstance(container, ast.Attribute) and container.attr == "user_attrs":
            return node.left
    return None


def _literal_store_fields(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        key = _attribute_access_key(node)
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append(f"{path.relative_to(ROOT)}:{key.lineno}: attribute {key.value!r} by a literal")
        if isinstance(node, ast.Constant) and node.value in DISTINCTIVE and id(node) not in docstrings:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return found


def test_no_store_field_is_named_by_a_literal_outside_storage_record() -> None:
    modules = [path for package in READERS_AND_WRITERS for path in sorted((ROOT / package).rglob("*.py"))]
    assert len(modules) > 50
    found = [hit for path in modules if path != ROOT / "storage" / "record.py" for hit in _literal_store_fields(path)]
    assert found == [], "name these by their storage.record constant:\n" + "\n".join(found)


def test_every_name_is_spelled_once() -> None:
    by_value: dict[str, list[str]] = {}
    for name, value in NAMES.items():
        by_value.setdefault(value, []).append(name)
    assert {value: found for value, found in by_value.items() if len(found) > 1} == {}
