"""What the harness knows about each repository: one row of `REPOS` per "owner/name", read here only.

A row says what differs from the defaults for that repository's tests; a repository without a
row (a mined one, `acme/widget`) gets `Repository()`: its tests under pytest, nothing added.

    runner              the RUNNERS entry (runners.py) that starts its tests: its command, its
                        recorder and canaries, the folders it owns whole (guarded)
    runner_args         that runner's options, as SWE-bench's command passes them, and the
    runner_args_by_version  versions whose command differs (django 1.9: no --settings, no --parallel)
    requirements        added to a SWE-bench spec's: the runner the harness uses where SWE-bench
                        used another (sympy: `bin/test`, its suite also runs under pytest, its
                        conftest.py making sympy's XFAIL and SKIP pytest's)
    runner_only         a SWE-bench spec's requirements that only run SWE-bench's own command,
                        left out (sphinx: tox; the harness runs pytest itself)
    test_data           packages shipping the data files the tests download at run time,
                        installed undated (EnvSpec.undated: published after most commits)
    services            stand-ins of services.REGISTRY for public services the tests call
                        (SWE-bench's containers had the internet, the sandbox has none)
    test_requirement_files  where it declares its test requirements, beside the common names
                        (declared.TEST_REQUIREMENT_FILES) a derived environment reads
    version_files       where it states its version at a commit ({name}: its last name, lowercase),
                        for SWE-bench rows that carry none (data.swebench_exec.infer_version)

SWE-bench's own per-version specs of these repositories (python, conda packages, pip_packages,
install, pre_install: its harness's constants) are data beside this module, swebench_specs.json,
keyed the same way; every repository there has a row here (tests/reward/test_repos.py).
Adding a repository is one row (and its SWE-bench spec in that file, for SWE-bench rows):

    "pydicom/pydicom": Repository(test_data=("pydicom-data",)),

Standard library only (with runners.py's names as plain strings): environments.py and the
data commands read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SWEBENCH_SPECS = Path(__file__).with_name("swebench_specs.json")

# Where a repository states its version at a commit: `__version__ = "2.0.1.dev0"` (flask,
# requests, sympy's release.py), `VERSION = (3, 0, 0, "alpha", 0)` (django), `version = "..."`.
VERSION_FILES = (
    "src/{name}/__init__.py",
    "{name}/__init__.py",
    "{name}/__pkginfo__.py",  # pylint: the version being developed ("2.13.0-dev0")
    "{name}/release.py",
    "{name}/version.py",
    "setup.cfg",
)
# django's runner options as SWE-bench passes them (its TEST_DJANGO; 1.9: TEST_DJANGO_NO_PARALLEL).
_DJANGO_ARGS = ("--settings=test_sqlite", "--parallel", "1")


@dataclass(frozen=True)
class Repository:
    runner: str = "pytest"  # a RUNNERS name (runners.py)
    runner_args: tuple[str, ...] = ()  # the runner's options (every version not listed below)
    runner_args_by_version: dict[str, tuple[str, ...]] = field(default_factory=dict)  # version -> its options
    requirements: tuple[str, ...] = ()  # added to a SWE-bench spec's requirements
    runner_only: frozenset[str] = frozenset()  # a spec's requirements left out (canonical names)
    test_data: tuple[str, ...] = ()  # packages of the tests' data files, installed undated
    services: tuple[str, ...] = ()  # stand-ins served in the sandbox (services.REGISTRY)
    test_requirement_files: tuple[str, ...] = ()  # its own test requirement files (derived environments)
    version_files: tuple[str, ...] = VERSION_FILES  # where its version is stated ({name}: last name)

    def command_at(self, version: str | None) -> tuple[str, tuple[str, ...]]:
        """(EnvSpec.runner, EnvSpec.runner_args) at a version (None: the default options)."""
        if version is not None and version in self.runner_args_by_version:
            return self.runner, self.runner_args_by_version[version]
        return self.runner, self.runner_args


REPOS: dict[str, Repository] = {
    "astropy/astropy": Repository(),
    "dbt-labs/dbt-core": Repository(),
    "django/django": Repository(
        runner="django",
        runner_args=_DJANGO_ARGS,
        runner_args_by_version={"1.9": ()},
        test_requirement_files=("tests/requirements/py3.txt",),  # SWE-bench's requirements_paths for it
    ),
    "marshmallow-code/marshmallow": Repository(),
    "matplotlib/matplotlib": Repository(),
    "mwaskom/seaborn": Repository(),
    "pallets/flask": Repository(),
    # Old suites (before pytest-httpbin, 2015) send their requests to http://httpbin.org.
    "psf/requests": Repository(services=("httpbin",)),
    "pvlib/pvlib-python": Repository(),
    "pydata/xarray": Repository(),
    # Its tests fetch their data files from the network at run time; pydicom-data ships them.
    "pydicom/pydicom": Repository(test_data=("pydicom-data",)),
    "pylint-dev/astroid": Repository(),
    "pylint-dev/pylint": Repository(),
    "pytest-dev/pytest": Repository(),
    "pyvista/pyvista": Repository(),
    "scikit-learn/scikit-learn": Repository(),
    # SWE-bench runs `tox --current-env -epy39 -v --`; tox's pins, resolved with their
    # dependencies as of a 2020 date, are not installable either.
    "sphinx-doc/sphinx": Repository(runner_only=frozenset({"tox", "tox-current-env"})),
    "sqlfluff/sqlfluff": Repository(),
    "swe-bench/humaneval": Repository(),
    # SWE-bench runs `bin/test -C --verbose`; the suite also runs under pytest.
    "sympy/sympy": Repository(requirements=("pytest",)),
}
_DEFAULT = Repository()
# Every row's own test requirement files, in the rows' order: part of every environment's
# cache key (environments.py), as the common names are.
TEST_REQUIREMENT_FILES = tuple(dict.fromkeys(f for row in REPOS.values() for f in row.test_requirement_files))


def lookup(repo: str) -> Repository:
    """The row of "owner/name"; the defaults for a repository without one."""
    return REPOS.get(repo, _DEFAULT)


def version_files(repo: str) -> tuple[str, ...]:
    """The files that may state the version of "owner/name" at a commit, in the order read."""
    name = repo.split("/")[-1].lower()
    return tuple(path.format(name=name) for path in lookup(repo).version_files)


def swebench_specs(path: Path = SWEBENCH_SPECS) -> dict[str, Any]:
    """SWE-bench's specs: "owner/name" -> {"requirements_paths": [...], "specs": [{"versions": [...], ...}]}."""
    repositories: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["repositories"]
    return repositories


def replacements(path: Path = SWEBENCH_SPECS) -> dict[str, str]:
    """Requirements SWE-bench's harness swaps (packages yanked from PyPI since) -> their replacement."""
    swaps: dict[str, str] = json.loads(path.read_text(encoding="utf-8")).get("replace_requirements", {})
    return swaps
