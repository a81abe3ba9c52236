"""What users install and run: declared dependencies are used; README, CI and Makefile agree."""

from __future__ import annotations

import ast
import importlib.metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def test_readme_starts_with_the_two_commands() -> None:
    lines = [line for line in (ROOT / "README.md").read_text().splitlines() if line.strip()]
    commands = [line for line in lines[:8] if line.startswith(("make ", "    make "))]
    assert [command.strip() for command in commands] == ["make serve", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


#: Dependencies the package uses without importing them, and where.
USED_WITHOUT_IMPORT = {
    # SQLAlchemy loads it for every postgresql:// URL (tiers/sql/engine.py names the driver).
    "psycopg": "postgresql+psycopg",
}


def _imported_modules() -> set[str]:
    sources = [*(ROOT / "memory_chain").rglob("*.py"), ROOT / "server.py"]
    found: set[str] = set()
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_every_declared_dependency_is_used() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    modules_of: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            modules_of.setdefault(canonicalize_name(dist), set()).add(module)
    imported = _imported_modules()
    engine = (ROOT / "memory_chain" / "tiers" / "sql" / "engine.py").read_text()
    unused = []
    for requirement in declared:
        name = canonicalize_name(Requirement(requirement).name)
        if name in USED_WITHOUT_IMPORT:
            assert USED_WITHOUT_IMPORT[name] in engine
            continue
        modules = modules_of.get(name)
        assert modules, f"{name} is declared but not installed"
        if not modules & imported:
            unused.append(name)
    assert unused == [], f"declared in pyproject.toml, never imported by memory_chain: {unused}"
