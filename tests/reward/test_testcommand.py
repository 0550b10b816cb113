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


def test_what_pytests_walk_would_leave_out_is_left_out_of_the_named_files():
    """The harness names test files, which pytest collects whatever its configuration says of
    folder walks: its norecursedirs, addopts' --ignore and the command's are applied here, and
    type-checker cases (mypy's and pyright's inputs, failing at import) are left out."""
    files = {
        "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "--ignore=tests/slow -p no:cacheprovider"\n'
        'norecursedirs = ["fixtures", "tests/data*"]\n',
        "tests/typing/test_reveal.py": "from widget import double\n\nreveal_type(double(2))\n",
        "tests/typing/test_cases.py": "from widget import double\n\nx: int = double(2)\n",  # no test in it
        "tests/typing/test_runtime.py": "def test_runtime():\n    assert True\n",  # a real test there
        "tests/mypy/test_plugin.py": "def test_plugin_runs_mypy():\n    assert_type = 1\n",
        "tests/mypy_test_cases/test_errors.py": "import widget\n\nd: dict = widget.Error('x').messages_dict\n",
    }
    tests = (
        "tests/test_a.py",
        "tests/slow/test_b.py",
        "tests/fixtures/test_c.py",
        "tests/data_v2/test_d.py",
        "tests/typing/test_reveal.py",
        "tests/typing/test_cases.py",
        "tests/typing/test_runtime.py",
        "tests/mypy/test_plugin.py",
        "tests/mypy_test_cases/test_errors.py",
        ".tox/test_e.py",
    )
    kept, left_out = testcommand.collected(tests, files.get, ("--ignore-glob=*/test_a.py",))
    assert kept == ("tests/typing/test_runtime.py", "tests/mypy/test_plugin.py", ".tox/test_e.py")
    assert left_out == {
        "tests/test_a.py": "--ignore-glob",
        "tests/slow/test_b.py": "--ignore",
        "tests/fixtures/test_c.py": "under tests/fixtures/ (norecursedirs)",
        "tests/data_v2/test_d.py": "under tests/data_v2/ (norecursedirs)",
        "tests/typing/test_reveal.py": "type-checker cases",
        "tests/typing/test_cases.py": "type-checker cases",
        "tests/mypy_test_cases/test_errors.py": "type-checker cases",
    }
    # Unset, pytest's own norecursedirs apply (a hidden folder, build/, a virtualenv).
    kept, _ = testcommand.collected(("tests/test_a.py", ".tox/test_e.py", "build/test_f.py"), {}.get)
    assert kept == ("tests/test_a.py",)
    assert testcommand.ignored(["--ignore", "./a/", "--ignore-glob='*_x.py'", "-k", "not slow"]) == (["a"], ["*_x.py"])


def test_a_linked_configuration_file_is_not_read(tmp_path):
    """A Makefile or tox.ini that is a link could name any host file: its commands never reach
    the runner."""
    files = {"Makefile": "test:\n\tpytest -W error tests\n", "tox.ini": "[testenv]\ncommands = pytest -x t\n"}
    host = write_tree(tmp_path / "host", {**files, "tests/t.py": ""})
    for name in files:
        snapshot = write_tree(tmp_path / name, {"tests/t.py": ""})
        (snapshot / name).symlink_to(host / name)
        assert own_command(snapshot) == TestCommand(), name
    (host / "tox.ini").unlink()
    assert own_command(host) == TestCommand("Makefile", ("-W", "error"), ("tests",), ())
