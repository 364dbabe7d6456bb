"""Every third-party module a distribution imports is one it declares in its pyproject.toml."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: (pyproject.toml's folder, the import package it ships)
DISTRIBUTIONS = [(ROOT, "hub")] + [
    (p.parent, f"hub_{p.parent.name}") for p in sorted((ROOT / "extensions").glob("*/pyproject.toml"))
]


def _declared(project_dir: Path, *, extras: bool = True) -> set[str]:
    """The normalised names of the distributions its pyproject.toml requires."""
    project = tomllib.loads((project_dir / "pyproject.toml").read_text())["project"]
    reqs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values() if extras else ():
        reqs += extra
    return {_norm(re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0]) for r in reqs}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _optional(tree: ast.Module) -> set[ast.AST]:
    """Imports inside ``try: ... except ImportError``: a feature used when present, not required."""
    guarded: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in {"ImportError", "ModuleNotFoundError"} for h in node.handlers
        ):
            for part in node.body:
                guarded.update(ast.walk(part))
    return guarded


def _imported(package: Path) -> dict[str, str]:
    """Each top-level module imported anywhere under ``package``, with one file that imports it."""
    found: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        optional = _optional(tree)
        for node in ast.walk(tree):
            if node in optional:
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize(("project_dir", "package"), DISTRIBUTIONS, ids=[p for _, p in DISTRIBUTIONS])
def test_each_imported_distribution_is_declared(project_dir: Path, package: str) -> None:
    providers = importlib.metadata.packages_distributions()
    declared = _declared(project_dir) | {"hub"}
    if package != "hub":  # an extension requires hub, so what the core requires is there too
        declared |= _declared(ROOT, extras=False)
    missing = []
    for module, where in _imported(project_dir / package).items():
        if module in sys.stdlib_module_names or module in {package, "hub", "__future__"}:
            continue
        dists = {_norm(d) for d in providers.get(module, [])}
        if dists and not dists & declared:
            missing.append(f"{module} ({where}: provided by {', '.join(sorted(dists))})")
    assert not missing, f"{project_dir.name}/pyproject.toml does not declare: {missing}"
