"""The repository's own test command (testcommand.py): which pytest options and selection the
harness passes on, read from tox, nox, a Makefile, CI workflows and pytest's configuration."""

from __future__ import annotations

from data.fixtures.synthetic import write_tree
from reward.execution import testcommand
from reward.execution.runners import BOOTSTRAP, PYTEST_ARGS, runner_for
from reward.execution.testcommand import TestCommand, own_command, vet


def test_only_options_that_keep_the_harness_in_control_are_passed_on():
    argv = ["-v", "--tb=short", "-W", "error", "-m", "not slow and not network", "-k", "test_fast", "-p", "no:warnings"]
    argv += ["-x", "--cov=pkg", "--basetemp={envtmpdir}", "tests/unit", "{posargs}", "--import-mode=importlib"]
    argv += ["-n", "4", "-o", "python_files=*.py", "--strict-markers", "tests/test_a.py::test_one"]
    args, paths, ignored = vet(argv)
    assert args == ["-W", "error", "-m", "not slow and not network", "--import-mode=importlib", "--strict-markers"]
    assert paths == ["tests/unit", "tests/test_a.py"]
    assert [i.split(":")[0] for i in ignored] == [
        "-k test_fast",
        "-p no",
        "-x",
        "--cov=pkg",
        "--basetemp={envtmpdir}",
        "-n 4",
        "-o python_files=*.py",
    ]
    assert "canaries" in ignored[0] and "plugin" in ignored[1]
    assert testcommand.only_takes_away("not slow") and not testcommand.only_takes_away("slow or not fast")


def test_the_command_is_read_from_tox_then_nox_then_a_makefile_then_ci(tmp_path):
    tox = write_tree(
        tmp_path / "tox",
        {"tox.ini": "[testenv]\ncommands =\n    python -m pytest -W error tests {posargs}\n", "tests/t.py": ""},
    )
    assert own_command(tox) == TestCommand("tox", ("-W", "error"), ("tests",), ())
    nox = write_tree(
        tmp_path / "nox",
        {"noxfile.py": 'def t(session):\n    session.run("pytest", "-m", "not slow", "src/")\n', "src/x.py": ""},
    )
    assert own_command(nox) == TestCommand("noxfile.py", ("-m", "not slow"), ("src",), ())
    make = write_tree(
        tmp_path / "make",
        {"Makefile": "lint:\n\truff .\ntest:\n\t@coverage run -m pytest -x testing\n", "testing/t.py": ""},
    )
    assert own_command(make).paths == ("testing",) and own_command(make).ignored[0].startswith("-x")
    ci = {
        ".github/workflows/ci.yml": "steps:\n  - run: pip install -e .\n  - run: cd . && pipenv run pytest --import-mode=append t\n"
    }
    assert own_command(write_tree(tmp_path / "ci", {**ci, "t/x.py": ""})).args == ("--import-mode=append",)
    # A path the snapshot does not have, or above it, selects nothing: pytest's testpaths then.
    cfg = {
        "tox.ini": "[testenv]\ncommands = pytest ../elsewhere\n",
        "setup.cfg": "[tool:pytest]\ntestpaths = tests docs\n",
    }
    assert own_command(write_tree(tmp_path / "cfg", {**cfg, "tests/t.py": ""})).paths == ("tests",)
    pyproject = '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    assert testcommand.testpaths(write_tree(tmp_path / "pp", {"pyproject.toml": pyproject})) == ["tests"]
    assert own_command(tmp_path / "nothing") == TestCommand()


def test_pytest_runs_the_passed_on_options_after_the_harnesss_and_before_the_tests():
    argv, canaries = runner_for("pytest").command("/py", ("-W", "error"), ".", ["tests/test_a.py"])
    assert argv[argv.index(BOOTSTRAP) + 1 :] == [*PYTEST_ARGS, "-W", "error", "tests/test_a.py", canaries.path]


def test_python_files_are_read_from_the_configuration_pytest_reads():
    files = {"setup.cfg": "[tool:pytest]\npython_files = tests_*.py check_*.py\n", "tox.ini": "[tox]\n"}
    assert testcommand.python_files(files.get) == ("tests_*.py", "check_*.py")
    assert testcommand.python_files({}.get) == ("test_*.py", "*_test.py")
