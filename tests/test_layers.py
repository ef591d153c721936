"""The house's layering rules (docs/architecture.md), read from every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("common", "trainers", "search_space", "studies", "storage", "reports", "benchmarks", "tests")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module of ours that ``path`` imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] in OURS}


MODULES = {
    _module_name(path): _imports(path)
    for package in ("common", "trainers", "search_space", "studies", "storage", "reports")
    for path in sorted((ROOT / package).rglob("*.py"))
}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _violations(importer: str, allowed: tuple[str, ...]) -> list[str]:
    """Imports of modules under ``importer`` that fall outside ``allowed`` packages."""
    return sorted(
        f"{module} imports {target}"
        for module, targets in MODULES.items()
        if _within(module, importer)
        for target in targets
        if not any(_within(target, ok) for ok in allowed)
    )


RULES = {
    # package: the packages (or modules) it may import; ``common`` (helpers) any package may, and it imports none
    "common": ("common",),
    "storage": ("storage", "common"),  # common's helpers only (a path on a read-only medium)
    "trainers": ("trainers", "common"),
    "search_space": ("search_space", "trainers", "common"),
    "reports": ("reports", "studies.results", "storage", "common"),  # views of results: they compute none
    "studies.results": ("studies.results", "storage", "common"),  # the analysis core: knows no rendering
    "studies.catalogue": ("studies.catalogue", "search_space", "trainers", "common"),
    "studies": ("studies", "search_space", "trainers", "storage", "reports", "common"),  # never benchmarks (the truth)
    "studies.engine": (
        "studies.engine",
        "studies.catalogue.schema",
        "studies.catalogue.search_strategy",  # the schema's Search, in a module of its own
        "studies.catalogue.store_names",  # a run's store name, built in one place
        "studies.catalogue.reliability",  # how sure a preset's answer is (the schema's Preset holds one)
        "studies.catalogue.tasks",
        "search_space",
        "trainers",
        "storage",
        "studies.results",
        "common",  # never a view (``reports``): the command line renders the report (studies.show)
    ),
}


@pytest.mark.parametrize("package", list(RULES))
def test_dependencies_point_one_way(package: str) -> None:
    """Each package imports only the layers below it: the catalogue is data, the engine names no
    particular study nor any view, results know no rendering, storage and trainers import only common."""
    assert MODULES, "no modules found"
    assert _violations(package, RULES[package]) == []


def test_the_rules_can_fail() -> None:
    """The check sees real imports: the engine does import the catalogue's schema."""
    assert _violations("studies.engine", ("studies.engine",))
    assert any("studies.catalogue.schema" in line for line in _violations("studies.engine", ("studies.engine",)))


@pytest.mark.parametrize("helper", ["conftest.py", "commands.py"])
def test_the_suite_s_shared_helpers_import_nothing_from_benchmarks(helper: str) -> None:
    """Every test loads these: they import the product and ``common``, never ``benchmarks/`` (which sits above all)."""
    imported = _imports(ROOT / "tests" / helper)
    assert imported, f"tests/{helper} imports nothing of ours: the check reads the wrong file"
    assert sorted(name for name in imported if _within(name, "benchmarks")) == []
