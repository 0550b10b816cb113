"""Building an environment for install="snapshot": the snapshot's setup.py runs in the sandbox,
never on the host, and what it declares reaches the host only as checked requirement strings.

Needs the sandbox (root) and PyPI (the declared dependencies are installed from it): skipped
with the reason where either is absent.
"""

from __future__ import annotations

import functools
import logging
import urllib.request
from pathlib import Path

import pytest

from reward.execution import identity, sandbox
from reward.execution.environments import EnvironmentFailed, Environments, EnvSpec


@functools.cache
def _no_pypi() -> str | None:
    try:
        urllib.request.urlopen("https://pypi.org/simple/six/", timeout=5).close()
    except OSError as exc:
        return f"PyPI is not reachable: {exc}"
    return None


pytestmark = [
    pytest.mark.skipif(sandbox.available() is not None, reason=f"no sandbox: {sandbox.available()}"),
    pytest.mark.skipif(_no_pypi() is not None, reason=str(_no_pypi())),
]

# Run by the build: it writes a marker at a host path (inside the sandbox that path is in its
# own /tmp), and records who ran it in the metadata, which only running it can tell.
SETUP_PY = """
import os
from pathlib import Path
from setuptools import setup

try:
    Path({marker!r}).write_text("setup.py ran here")
except OSError:  # in the sandbox: that folder is not there
    pass
setup(
    name="widget",
    version="1.2.3",
    description=f"built as uid {{os.getuid()}}",
    packages=["widget"],
    install_requires={requires!r},
    extras_require={{"test": ["iniconfig"], "unused": ["this-package-does-not-exist-xyz"]}},
)
"""


def _snapshot(tmp_path: Path, requires: list[str]) -> tuple[Path, Path]:
    snapshot, marker = tmp_path / "snapshot", tmp_path / "host" / "marker"
    (snapshot / "widget").mkdir(parents=True)
    marker.parent.mkdir()  # setup.py run on the host would write the marker
    (snapshot / "widget" / "__init__.py").write_text("WHERE = 'snapshot'\n")
    (snapshot / "setup.py").write_text(SETUP_PY.format(marker=str(marker), requires=requires))
    for path in [snapshot, *snapshot.rglob("*")]:  # as snapshots.py leaves a snapshot
        identity.give(path)
    return snapshot, marker


def test_the_snapshot_is_built_in_the_sandbox_and_only_its_metadata_installed(tmp_path):
    snapshot, marker = _snapshot(tmp_path, ["six", "tomli; python_version < '3'"])
    spec = EnvSpec(python="3.11", install="snapshot", extras=("test",), requirements=("pytest",))
    env = Environments(tmp_path / "envs").ensure(spec, snapshot)
    assert not marker.exists()  # setup.py never ran on the host
    (site,) = Path(env.python).parent.parent.glob("lib/python*/site-packages")
    (info,) = site.glob("widget-*.dist-info")
    metadata = (info / "METADATA").read_text()
    assert info.name == "widget-1.2.3.dist-info" and "Summary: built as uid 65534" in metadata
    assert not (site / "widget").exists()  # its code is the snapshot's, on PYTHONPATH
    assert sorted(p.name for p in snapshot.iterdir()) == ["setup.py", "widget"]  # no build/, no egg-info
    probe = (
        "import importlib.metadata as m, six, iniconfig, widget; "
        "print(m.version('widget'), widget.WHERE, widget.__file__); "
        "print(sorted(d.metadata['Name'].lower() for d in m.distributions()))"
    )
    result = sandbox.run([env.python, "-c", probe], snapshot=snapshot, ro_paths=env.ro_paths, env=env.variables)
    assert result.returncode == 0, result.stderr
    first, names = result.stdout.splitlines()
    assert first == "1.2.3 snapshot /testbed/widget/__init__.py"
    # The declared dependency, the "test" extra's, the spec's runner and SEED; not the unused
    # extra's nor the one whose marker does not hold.
    assert {"six", "iniconfig", "pytest", "pip", "setuptools", "wheel", "widget"} <= set(eval(names))
    assert not {"tomli", "this-package-does-not-exist-xyz"} & set(eval(names))


@pytest.mark.parametrize("evil", ["evil @ file:///etc", "evil @ https://example.invalid/evil-1.0.tar.gz"])
def test_a_declared_dependency_with_a_url_or_a_path_fails_the_build(tmp_path, evil):
    snapshot, marker = _snapshot(tmp_path, ["six", evil])
    envs = Environments(tmp_path / "envs")
    with pytest.raises(EnvironmentFailed, match=r"the snapshot's requirements: 'evil ?@ (file|https)://") as exc:
        envs.ensure(EnvSpec(python="3.11", install="snapshot"), snapshot)
    assert "refused" in str(exc.value) and not marker.exists()
    assert not (tmp_path / "envs" / envs.key(EnvSpec(python="3.11", install="snapshot"), snapshot)).exists()


# -- SWE-bench's install order and pins (no build: the commands and the choice are pure) --------


def test_the_later_of_two_requirements_for_a_package_wins_and_is_logged(caplog):
    from reward.execution.environments import later_wins

    with caplog.at_level("INFO", logger="reward.execution.environments"):
        chosen = later_wins(["MarkupSafe==2.1.2", "flask", "markupsafe==2.1.1", "flask"])
    assert chosen == ["markupsafe==2.1.1", "flask"]
    assert "'MarkupSafe==2.1.2' and then 'markupsafe==2.1.1': the later wins" in caplog.text
    # a requirement for some interpreters only replaces nothing
    marked = ['numpy==1.19; python_version < "3.8"', "numpy==1.21"]
    assert later_wins(marked) == marked
    # a later bare name finds the earlier pin satisfied, as pip would; a later pin still wins
    assert later_wins(["numpy==1.19.2", "scipy", "numpy", "scipy==1.5.2"]) == ["numpy==1.19.2", "scipy==1.5.2"]


def test_exact_pins_are_exempt_from_the_date_and_bytecode_is_compiled():
    from reward.execution.environments import EnvSpec, _install, exact_pin

    assert exact_pin("werkzeug==2.3.7") and exact_pin("x===1.0") and exact_pin("a[b]==1; python_version>'3'")
    assert not exact_pin("werkzeug>=2.3") and not exact_pin("werkzeug==2.*") and not exact_pin("werkzeug")
    spec = EnvSpec(exclude_newer="2023-08-01T00:00:00Z", undated=("pydicom-data",))
    cmd = _install("/venv/bin/python", spec, ["Werkzeug==2.3.7", "setuptools==70.0.0", "pytest<8", "blinker"])
    assert "--compile-bytecode" in cmd
    assert cmd[cmd.index("--exclude-newer") + 1] == "2023-08-01T00:00:00Z"
    exempt = [cmd[i + 1].split("=")[0] for i, a in enumerate(cmd) if a == "--exclude-newer-package"]
    assert exempt == ["pydicom-data", "werkzeug", "setuptools"]
    assert cmd[-4:] == ["Werkzeug==2.3.7", "setuptools==70.0.0", "pytest<8", "blinker"]


SCM_SETUP_PY = """
import os
from pathlib import Path
from setuptools import setup

# What setuptools_scm's write_to does: the version module exists only once the project is built.
version = os.environ.get("SETUPTOOLS_SCM_PRETEND_VERSION", "unknown")
Path("widget/_version.py").write_text(f"version = {version!r}\\n")
setup(name="widget", version=version, packages=["widget"])
"""


def test_a_version_module_the_build_writes_is_added_to_the_runs_with_the_specs_version(tmp_path):
    """pytest's own repository: `import _pytest` needs src/_pytest/_version.py, which only its
    build writes (setuptools_scm), with the version the build was given (a git archive has none)."""
    snapshot, _ = _snapshot(tmp_path, [])
    (snapshot / "setup.py").write_text(SCM_SETUP_PY)
    spec = EnvSpec(python="3.11", install="snapshot", version="4.5.0")
    env = Environments(tmp_path / "envs").ensure(spec, snapshot)
    assert env.generated == {"widget/_version.py": "version = '4.5.0'\n"}
    assert not (snapshot / "widget" / "_version.py").exists()  # the snapshot itself stays the commit's
    assert Environments(tmp_path / "envs").ensure(spec, snapshot).generated == env.generated  # cached too
    assert "version" not in EnvSpec(python="3.11").to_json()  # specs without it read as before


def test_a_package_the_date_filters_out_of_a_resolution_is_exempted_and_the_install_retried(tmp_path, caplog):
    """uv names the package its date cut made unsatisfiable (an exact pin's dependency published
    after the date); the install is retried with it exempt, logged, a bounded number of times."""
    calls: list[list[str]] = []
    hint = "hint: `markupsafe` was filtered by `exclude-newer` to only include packages uploaded before 2020"

    def tool(cmd, what):
        calls.append(cmd)
        if len(calls) == 1:
            raise EnvironmentFailed(f"{what} failed: no solution", f"error: no solution\n{hint}\n")

    envs = Environments(tmp_path)
    envs._tool = tool  # type: ignore[method-assign]
    spec = EnvSpec(python="3.9", exclude_newer="2020-10-05T00:00:00Z")
    with caplog.at_level(logging.INFO):
        envs._uv_install("/venv/bin/python", spec, ["Jinja2==3.0.3"], "install")
    assert len(calls) == 2 and not any(a.startswith("markupsafe=") for a in calls[0])
    assert any(a.startswith("markupsafe=") for a in calls[1]) and "markupsafe" in caplog.text
    envs._tool = lambda cmd, what: (_ for _ in ()).throw(EnvironmentFailed("failed", hint))  # type: ignore[method-assign]
    with pytest.raises(EnvironmentFailed):  # the same package again: no endless retry
        envs._uv_install("/venv/bin/python", spec, ["Jinja2==3.0.3"], "install")


def test_a_version_module_behind_a_link_the_build_made_is_not_read(tmp_path):
    """The build is the snapshot's code: a package folder it leaves as a link to a host folder
    is not entered, so no host file comes back into the runs as a version module."""
    from reward.execution.environments import _generated_versions

    host, out, snapshot = tmp_path / "host", tmp_path / "out", tmp_path / "snapshot"
    for folder in (host, out / "real", snapshot / "real", snapshot / "evil"):
        folder.mkdir(parents=True)
    (host / "secret_version.py").write_text("token = 'host'\n")
    (out / "evil").symlink_to(host)
    (out / "real" / "_version.py").write_text("version = '1.0'\n")
    (out / "real" / "linked_version.py").symlink_to(host / "secret_version.py")
    assert _generated_versions(out, snapshot, (".",)) == {"real/_version.py": "version = '1.0'\n"}


EXT_SETUP_PY = """
from setuptools import Extension, setup

setup(name="widget", version="1.0", packages=["widget"], ext_modules=[Extension("widget._speed", ["widget/_speed.c"])])
"""
EXT_C = """
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) {{ return PyLong_FromLong({value}); }}
static PyMethodDef methods[] = {{{{"answer", answer, METH_NOARGS, ""}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "_speed", NULL, -1, methods}};
PyMODINIT_FUNC PyInit__speed(void) {{ return PyModule_Create(&module); }}
"""


def _compiled_snapshot(tmp_path: Path, name: str, value: int) -> Path:
    snapshot, _ = _snapshot(tmp_path / name, [])
    (snapshot / "setup.py").write_text(EXT_SETUP_PY)
    (snapshot / "widget" / "_speed.c").write_text(EXT_C.format(value=value))
    for path in [snapshot, *snapshot.rglob("*")]:
        identity.give(path)
    return snapshot


def test_compiled_modules_are_built_once_per_snapshot_and_laid_over_it_read_only(tmp_path):
    """astropy's C and Cython: SWE-bench's `pip install -e .` compiles them into its testbed.
    Here the sandboxed build's modules are kept per (environment, snapshot) and mounted over the
    snapshot; two commits that share their setup.py share the environment, not the modules."""
    first, second = _compiled_snapshot(tmp_path, "a", 42), _compiled_snapshot(tmp_path, "b", 43)
    spec = EnvSpec(python="3.11", install="snapshot")
    envs = Environments(tmp_path / "envs")
    probe = "import widget._speed as s; print(s.answer(), s.__file__.startswith('/testbed/widget/_speed'))"
    answers = []
    for snapshot in (first, second):
        env = envs.ensure(spec, snapshot)
        assert len(env.layers) == 1 and sorted(p.name for p in (snapshot / "widget").iterdir()) == [
            "__init__.py",
            "_speed.c",
        ]  # the snapshot on disk stays the commit's
        result = sandbox.run(
            [env.python, "-c", probe], snapshot=snapshot, ro_paths=env.ro_paths, env=env.variables, layers=env.layers
        )
        assert result.returncode == 0, result.stderr
        answers.append((env.key, result.stdout.split()))
        write = "open('/testbed/widget/' + __import__('os').listdir('/testbed/widget')[0], 'a')"
        denied = sandbox.run([env.python, "-c", write], snapshot=snapshot, ro_paths=env.ro_paths, layers=env.layers)
        assert denied.returncode == 0  # writes land in the run's overlay, never in the kept modules
    assert answers[0][0] == answers[1][0] and envs.builds == 1  # one environment
    assert [a[1] for a in answers] == [["42", "True"], ["43", "True"]]  # each commit its own modules
    kept = sorted(p.relative_to(envs.root / "products") for p in (envs.root / "products").rglob("*.so"))
    assert len(kept) == 2 and all(p.parts[1:2] == ("widget",) for p in kept)
    assert Environments(tmp_path / "envs").ensure(spec, second).layers == env.layers  # cached: no rebuild


def test_a_pin_without_a_wheel_whose_source_fails_moves_to_its_line_in_wheels(tmp_path, monkeypatch, caplog):
    """scikit-learn's 1.3 spec pins numpy 1.19.2, which conda builds for Python 3.9 and PyPI
    has only as a source that no longer builds: the install retries with numpy's 1.19 line,
    wheels only, and the next install of that interpreter starts from there."""
    commands: list[list[str]] = []

    def tool(self, cmd, what):
        commands.append(cmd)
        if len(commands) == 1:
            raise EnvironmentFailed("failed", "error: Failed to build `numpy==1.19.2`\n  hint: ...")

    monkeypatch.setattr(Environments, "_tool", tool)
    envs = Environments(tmp_path)
    spec = EnvSpec(python="3.9", requirements=("numpy==1.19.2", "pytest"))
    with caplog.at_level("INFO", logger="reward.execution.environments"):
        envs._uv_install("python", spec, ["numpy==1.19.2", "pytest"], "install")
        envs._uv_install("python", spec, ["numpy==1.19.2", "scipy"], "install again")
    assert "numpy==1.19.2" in commands[0] and "--only-binary" not in commands[0]
    for retried in commands[1:]:
        assert "numpy<1.20,>=1.19.2" in retried and retried[retried.index("--only-binary") + 1] == "numpy"
    assert len(commands) == 3 and "no wheel here and its source did not build" in caplog.text


def test_a_commit_that_compiles_nothing_gets_an_empty_layer_once(tmp_path, monkeypatch):
    """An environment that compiled modules for one commit may meet a commit that compiles none:
    that commit's layer is empty and kept, so its build is not run again on every test run."""
    from reward.execution import environments

    first, second = _compiled_snapshot(tmp_path, "a", 1), _compiled_snapshot(tmp_path, "b", 2)
    spec = EnvSpec(python="3.11", install="snapshot")
    envs = Environments(tmp_path / "envs")
    envs.ensure(spec, first)
    builds: list[Path] = []
    real_pip = Environments._sandboxed_pip
    monkeypatch.setattr(environments, "_keep_products", lambda *args: False)  # as if the build left no .so
    monkeypatch.setattr(Environments, "_sandboxed_pip", lambda self, *a: builds.append(a[2]) or real_pip(self, *a))
    layers = [envs.ensure(spec, second).layers for _ in range(3)]
    assert builds == [second] and layers[0] == layers[2] and not any(Path(layers[0][0]).iterdir())
