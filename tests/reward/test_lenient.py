"""A snapshot's build metadata read leniently (lenient.py): requirements its build refuses, read
another way or dropped, in the files the sandboxed build sees; and a real build of a repository
whose own pyproject.toml has one (needs the sandbox and PyPI, skipped otherwise)."""

from __future__ import annotations

import tomllib

import pytest

from conf.config import ExecutionConfig
from data.fixtures.synthetic import write_tree
from data.inject.__main__ import git_sources
from reward.execution import environments, lenient, sandbox
from reward.execution.derivation import Deriver
from reward.execution.lenient import Repair
from tests.reward.test_derivation import _installed, _no_pypi, _widget


def test_a_refused_requirement_is_read_as_what_it_means_or_dropped():
    assert lenient.reading("pytest>=7.*") == "pytest>=7"
    assert lenient.reading("sphinx ~= 5.3.*") == "sphinx ~=5.3"
    assert lenient.reading("tomli; python_version<3.11") == 'tomli; python_version < "3.11"'
    assert lenient.reading("pytest-cov>=2.*; python_version < '3.12'") == "pytest-cov>=2; python_version < '3.12'"
    assert lenient.reading("tree-sitter=0.24") == "tree-sitter==0.24"
    # attrs 23.2.0's extras: a marker name packaging 22 dropped
    assert (
        lenient.reading('mypy>=1.6; python_implementation == "CPython" and python_version >= "3.8"')
        == 'mypy>=1.6; platform_python_implementation == "CPython" and python_version >= "3.8"'
    )
    assert lenient.reading("x; os.name == 'nt'") == "x; os_name == 'nt'"
    assert lenient.reading("mock >=2.0.0p") is None  # no version reads it: dropped
    assert lenient.reading("baz>=1.0dev-r12") is None  # a legacy version: no reading parses
    assert lenient.valid("x==1.*") and not lenient.valid("x>=1.*")


PYPROJECT = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "widget"
version = "0.1"
dependencies = ["attrs>=22", 'click>=8.*']

[project.optional-dependencies]
test = [
    "pytest>=7.*",
    "legacy>=1.0dev-r12",
    "coverage",
]
"""
SETUP_CFG = """[metadata]
name = widget

[options]
install_requires =
    attrs
    tomli; python_version<3.11

[options.extras_require]
docs = sphinx>=5.*
"""
SETUP_PY = """from setuptools import setup

setup(
    name="widget",
    classifiers=["Programming Language :: Python :: 3"],
    install_requires=["six>=1.*", "packaging>=20"],
    extras_require={"old": ['legacy>=1.0dev-r12', "coverage"]},
)
"""


def test_only_the_refused_requirements_change_in_the_files_the_build_reads(tmp_path):
    write_tree(tmp_path, {"pyproject.toml": PYPROJECT, "setup.cfg": SETUP_CFG, "setup.py": SETUP_PY})
    changes, repairs = lenient.repaired(tmp_path)
    assert repairs == [
        Repair("pyproject.toml", "click>=8.*", "click>=8"),
        Repair("pyproject.toml", "pytest>=7.*", "pytest>=7"),
        Repair("pyproject.toml", "legacy>=1.0dev-r12", None),
        Repair("setup.cfg", "tomli; python_version<3.11", 'tomli; python_version < "3.11"'),
        Repair("setup.cfg", "sphinx>=5.*", "sphinx>=5"),
        Repair("setup.py", "six>=1.*", "six>=1"),
        Repair("setup.py", "legacy>=1.0dev-r12", None),
    ]
    project = tomllib.loads(changes["pyproject.toml"] or "")["project"]
    assert project["dependencies"] == ["attrs>=22", "click>=8"]
    assert project["optional-dependencies"]["test"] == ["pytest>=7", "coverage"]
    assert '    tomli; python_version < "3.11"\n' in (changes["setup.cfg"] or "")
    assert "docs = sphinx>=5\n" in (changes["setup.cfg"] or "")
    setup_py = changes["setup.py"] or ""
    assert '"six>=1", "packaging>=20"' in setup_py and 'extras_require={"old": [ "coverage"]}' in setup_py
    assert "Programming Language :: Python :: 3" in setup_py  # not a requirement: untouched
    assert "dropped" in repairs[2].note() and "read as 'pytest>=7'" in repairs[1].note()
    assert (tmp_path / "pyproject.toml").read_text() == PYPROJECT  # the snapshot itself is never changed


def test_metadata_whose_requirements_all_parse_changes_nothing(tmp_path):
    write_tree(tmp_path, {"pyproject.toml": PYPROJECT.replace(".*", "").replace("dev-r12", "")})
    assert lenient.repaired(tmp_path) == ({}, [])
    assert lenient.repaired(tmp_path / "nothing") == ({}, [])


@pytest.mark.skipif(sandbox.available() is not None, reason=f"no sandbox: {sandbox.available()}")
@pytest.mark.skipif(_no_pypi() is not None, reason=str(_no_pypi()))
@pytest.mark.skipif(_installed("3.11") is not None, reason=str(_installed("3.11")))
def test_a_snapshot_whose_own_build_refuses_a_requirement_still_builds_and_runs_its_tests(tmp_path, monkeypatch):
    """setuptools refuses `pytest>=7.*` in an extra on every interpreter; the environment is
    built over its lenient reading, the note is in the derivation's record, the tests run."""
    monkeypatch.setattr(environments, "installed_for", lambda when, days=0: ("3.11",))
    pyproject = (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "widget"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n\n'
        '[project.optional-dependencies]\ntest = ["pytest>=7.*", "legacy-thing>=1.0dev-r12"]\n\n'
        '[tool.setuptools.packages.find]\nwhere = ["src"]\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\nmarkers = ["slow"]\n'
    )
    repo = _widget(tmp_path / "widget", {"pyproject.toml": pyproject, "requirements/tests.txt": "pytest==7.4.3\n"})
    entry = f"acme/widget={repo.path}"
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[entry], wall_s=120.0)
    deriver = Deriver(cfg)
    git_sources([entry], "HEAD", (), cfg, "derive", deriver)
    (derived,) = deriver.derivations
    assert derived.ok, derived.summary()
    (attempt,) = derived.attempts
    assert attempt.notes == (
        "pyproject.toml: 'pytest>=7.*' read as 'pytest>=7'",
        "pyproject.toml: 'legacy-thing>=1.0dev-r12' dropped (no reading of it is a requirement)",
    )
    assert attempt.counts.get("passed", 0) >= 1 and derived.record()["attempts"][0]["notes"] == attempt.notes
