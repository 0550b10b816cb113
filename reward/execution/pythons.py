"""Interpreters on this machine: which Python versions the test environments can be built with.

A repository at an old commit needs an old interpreter (requests, astroid, sqlfluff and pydicom
at their SWE-bench commits run on 3.9, not on the project's 3.11). `find_python("3.9")` looks,
in this order, and returns the first candidate that runs and reports that version:

    $SWE_RL_PYTHONS   os.pathsep-separated interpreters or prefixes (a prefix P is searched as
                      P/bin/pythonX.Y and P/usr/bin/pythonX.Y), e.g. /opt/python3.9
    /opt/pythonX.Y    where scripts/debian_python.sh unpacks Debian's interpreter (a private
                      prefix: nothing is installed into /)
    pyenv             $PYENV_ROOT/versions/X.Y.*/bin/pythonX.Y (the real binaries, not the shims)
    PATH, /usr/bin, /usr/local/bin

Each candidate is run once per process (a pyenv shim or a broken unpack is skipped, not
used). The sandbox mounts the interpreter's `sys.base_prefix` read-only, so an interpreter
must find everything it needs (its standard library, its own shared libraries) under that
prefix or under the system's /usr, /lib*: the Debian unpack sets its extension modules'
RUNPATH into the prefix for that reason.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from datetime import date, timedelta
from pathlib import Path

PYTHONS_VAR = "SWE_RL_PYTHONS"

# First release of each minor version: packages resolved as of an earlier date do not install
# on it (derive_candidates raises a resolution date to this), and it orders versions by age.
RELEASES = {
    "3.6": "2016-12-23",
    "3.7": "2018-06-27",
    "3.8": "2019-10-14",
    "3.9": "2020-10-05",
    "3.10": "2021-10-04",
    "3.11": "2022-10-24",
    "3.12": "2023-10-02",
    "3.13": "2024-10-07",
}
# Versions a derived environment chooses among (candidates.interpreters): 3.6 and 3.7 only for a
# commit from before 3.8 was out a while (installed_for: the interpreters of its time), else only when a
# spec names them (SWE-bench's django 3.0-3.2 and older repositories' specs: uv makes their
# venvs and installs into them, bytecode compiled by their own compileall); Python 2 is out of
# uv's range.
LEGACY = ("3.6", "3.7")
SUPPORTED = tuple(v for v in RELEASES if v not in LEGACY)


class InterpreterUnavailable(RuntimeError):
    """No interpreter of the spec's Python version on this machine."""


def _candidates(version: str) -> list[str]:
    name = f"python{version}"
    out: list[str] = []
    prefixes = [p for p in os.environ.get(PYTHONS_VAR, "").split(os.pathsep) if p] + [f"/opt/{name}"]
    for entry in prefixes:
        path = Path(entry)
        out += [str(path)] if path.is_file() else [str(path / "bin" / name), str(path / "usr" / "bin" / name)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    try:  # another user's pyenv (HOME left at /root by runuser or sudo) is none of this user's
        versions = sorted(pyenv.iterdir()) if pyenv.is_dir() else []
    except PermissionError:
        versions = []
    out += [str(p / "bin" / name) for p in versions if p.name.startswith(f"{version}.")]
    which = shutil.which(name)
    out += [which] if which else []
    out += [f"/usr/bin/{name}", f"/usr/local/bin/{name}"]
    return out


@functools.cache
def _reports(path: str, version: str) -> bool:
    """True when `path` runs and is Python `version` (a pyenv shim of another version is not)."""
    if not os.access(path, os.X_OK):
        return False
    try:
        out = subprocess.run(
            [path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == version


def find_python(version: str) -> str:
    """An interpreter of `version` ("3.9") on this machine (the search order: the module's doc)."""
    for path in _candidates(version):
        if _reports(path, version):
            return path
    raise InterpreterUnavailable(
        f"Python {version} is not installed on this machine (searched ${PYTHONS_VAR}, /opt/python{version}, "
        f"pyenv, PATH; scripts/debian_python.sh {version} unpacks one)"
    )


def installed(versions: tuple[str, ...] = SUPPORTED) -> tuple[str, ...]:
    """The `versions` that find_python finds here, oldest first."""
    found = []
    for version in versions:
        try:
            find_python(version)
        except InterpreterUnavailable:
            continue
        found.append(version)
    return tuple(found)


def installed_for(when: str | None, young_days: int = 0) -> tuple[str, ...]:
    """The versions a commit of `when` (ISO date) may be derived with: installed(), and the LEGACY
    ones found here for a commit from before the oldest SUPPORTED version was out `young_days`
    (a 2019 release ran on 3.7; candidates.MATURE_DAYS)."""
    first = date.fromisoformat(RELEASES[SUPPORTED[0]]) + timedelta(days=young_days)
    if when is None or when[:10] >= first.isoformat():
        return installed()
    return installed((*LEGACY, *SUPPORTED))
