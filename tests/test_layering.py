"""The package layering docs/architecture.md promises: `learner/` never imports `actors/` (the
learner runs without the Ray-side orchestration); `reward/` never imports `learner/`, and
`actors/` only where a command or a reward kind starts the test-runner pool (STARTS_POOL)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"learner": ("actors",), "reward": ("actors", "learner")}
STARTS_POOL = {"reward/execute.py": {"actors"}, "reward/execution/kinds.py": {"actors"}}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):  # lazy imports inside functions too
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_nothing_above_it(package):
    offenders = {
        rel: sorted(_imports(path) & set(FORBIDDEN[package]) - STARTS_POOL.get(rel, set()))
        for path in sorted((ROOT / package).rglob("*.py"))
        if (rel := str(path.relative_to(ROOT)))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_driver_reads_on_one_screen():
    """The step loop is the documentation (issue 12): new capabilities go into components and
    registries, not into train.py."""
    lines = len((ROOT / "train.py").read_text().splitlines())
    assert lines <= 200, f"train.py has {lines} lines: move the new logic into a component"
