"""The table of repositories (reward/execution/repos.py) is the one home of what the harness
knows per repository, and test runners are registered plug-ins (runners.py). No sandbox needed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conf.registry import RegistryError
from data.swebench_exec import infer_version
from reward.execution import repos, services
from reward.execution.environments import EnvSpec, derive_spec
from reward.execution.report import Canaries
from reward.execution.runner import command
from reward.execution.runners import BOOTSTRAP, PYTEST_ARGS, RUNNERS, Pytest, TestRunner, runner_for

ROOT = Path(__file__).resolve().parents[2]


def test_every_swebench_repository_has_a_row_and_every_row_a_spec():
    assert set(repos.swebench_specs()) == set(repos.REPOS)
    assert len(repos.REPOS) == 20


def test_every_row_names_a_registered_runner_and_known_stand_ins():
    for name, row in repos.REPOS.items():
        assert row.runner in RUNNERS, name
        assert set(row.services) <= set(services.REGISTRY), name
        assert name.count("/") == 1 and name == name.strip(), name  # keyed "owner/name", one way


def test_the_rows_hold_each_repositorys_facts():
    assert repos.lookup("django/django").command_at("3.2") == ("django", ("--settings=test_sqlite", "--parallel", "1"))
    assert repos.lookup("django/django").command_at("1.9") == ("django", ())
    assert repos.lookup("django/django").command_at(None) == ("django", ("--settings=test_sqlite", "--parallel", "1"))
    assert repos.lookup("sympy/sympy").requirements == ("pytest",)
    assert repos.lookup("sphinx-doc/sphinx").runner_only == frozenset({"tox", "tox-current-env"})
    assert repos.lookup("psf/requests").services == ("httpbin",)
    assert repos.lookup("pydicom/pydicom").test_data == ("pydicom-data",)
    assert repos.TEST_REQUIREMENT_FILES == ("tests/requirements/py3.txt",)
    # a repository without a row: pytest, nothing added
    assert repos.lookup("acme/widget") == repos.Repository()
    assert repos.lookup("acme/widget").command_at("1.0") == ("pytest", ())
    assert repos.version_files("pallets/flask") == (
        "src/flask/__init__.py",
        "flask/__init__.py",
        "flask/__pkginfo__.py",
        "flask/release.py",
        "flask/version.py",
        "setup.cfg",
    )
    assert infer_version({"pylint/__pkginfo__.py": '__version__ = "2.13.0-dev0"\n'}.get, "pylint-dev/pylint") == "2.13"


def test_a_derived_environment_takes_its_repositorys_row(tmp_path):
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='django')\n")
    (tmp_path / "tests" / "requirements").mkdir(parents=True)
    (tmp_path / "tests" / "requirements" / "py3.txt").write_text("asgiref>=3.7.0\n")
    django = derive_spec(tmp_path, None, "django/django")
    assert (django.runner, django.runner_args) == ("django", ("--settings=test_sqlite", "--parallel", "1"))
    assert django.requirements == ("asgiref>=3.7.0",)  # its runner is its own: no pytest added
    other = derive_spec(tmp_path, None, "acme/widget")  # not django's row: not django's files
    assert (other.runner, other.runner_args, other.requirements) == ("pytest", (), ("pytest",))


def test_a_runner_registered_twice_is_refused_and_an_unknown_one_is_named():
    with pytest.raises(RegistryError, match="test runner 'pytest' is registered twice"):
        RUNNERS.register("pytest")(Pytest)
    assert RUNNERS.get("pytest") is Pytest
    with pytest.raises(
        RegistryError, match=r"environment.runner='nose': unknown test runner; registered: pytest, django"
    ):
        runner_for("nose")
    with pytest.raises(
        ValueError, match=r"runner 'nose' is not one of \['django', 'jest', 'mocha', 'node-test', 'pytest', 'vitest'\]"
    ):
        EnvSpec(runner="nose")


def test_a_runner_for_another_framework_is_one_registered_class():
    @RUNNERS.register("toy")
    class Toy(TestRunner):
        guarded_dirs = ("spec",)

        def command(self, python, runner_args, import_root, tests):
            canaries = Canaries.beside(tests, import_root)
            return [python, BOOTSTRAP, "--toy", *runner_args, *tests], canaries

    try:
        spec = EnvSpec(runner="toy", runner_args=("-x",), pythonpath=("src",))
        argv, canaries = command("/py", spec, ["spec/a_test.py"])
        assert argv == ["/py", BOOTSTRAP, "--toy", "-x", "spec/a_test.py"]
        assert canaries.path.startswith("spec/test_") and canaries.helper.startswith("src/")
        assert EnvSpec.from_json(spec.to_json()) == spec
        assert runner_for("toy").guarded_dirs == ("spec",)
    finally:
        RUNNERS.unregister("toy")


def test_the_pytest_command_is_the_harness_bootstrap_with_its_options():
    argv, canaries = command("/py", EnvSpec(), ["tests/test_a.py"])
    assert argv == ["/py", "-s", "-B", BOOTSTRAP, *PYTEST_ARGS, "tests/test_a.py", canaries.path]
    assert PYTEST_ARGS == ("-p", "no:cacheprovider", "-q", "-rN", "--tb=line")
    assert canaries.path.startswith("tests/test_") and not canaries.label


def _string_constants(path: Path) -> set[str]:
    """The string literals of a module's code (its docstrings left out)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    }


def test_no_module_of_the_harness_or_the_data_commands_names_a_repository_of_the_table():
    """A repository's facts are its row, not a branch or a constant keyed by its name elsewhere."""
    # keyed either way ("owner/name" or its last name); a runner's name is also a last name
    names = set(repos.REPOS) | {n.split("/")[1] for n in repos.REPOS} - set(RUNNERS.names())
    found = {}
    for path in sorted([*(ROOT / "reward").rglob("*.py"), *(ROOT / "data").glob("*.py")]):
        if path.name == "repos.py":
            continue
        if hit := sorted(names & _string_constants(path)):
            found[str(path.relative_to(ROOT))] = hit
    assert found == {}
