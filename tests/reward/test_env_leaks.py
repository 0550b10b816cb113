"""Leaks through an environment's build: the repository's own release in the environment, and
host paths or other sources the host's package managers would read (owncode.py, jssources.py).

Each attack is a base repository a hostile or careless author could publish: a dependency that
pulls in a later release of the repository's own package (it leaks the fix, and shadows the
snapshot), a manifest or lock file naming a host path, a git repository or a URL (the host's
package manager runs as root). All offline: the "later release" is a wheel or an npm tarball
the test writes. Python builds need uv and Python 3.11 on this machine; Node ones need node/npm.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from reward.execution import declared, environments, node
from reward.execution.environments import EnvironmentFailed, Environments, EnvSpec
from reward.execution.pythons import InterpreterUnavailable, find_python
from tests.reward import jsrepos


def _python_311() -> str | None:
    try:
        find_python("3.11")
    except InterpreterUnavailable as exc:
        return str(exc)
    return None


needs_311 = pytest.mark.skipif(_python_311() is not None, reason=f"no Python 3.11: {_python_311()}")
needs_node = pytest.mark.skipif(shutil.which("npm") is None, reason="no node/npm on PATH")


def _wheel(folder: Path, name: str, version: str, files: dict[str, str], requires: tuple[str, ...] = ()) -> None:
    """A pure-Python wheel, written by hand (a release on a local index)."""
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    wheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries = {**files, f"{info}/METADATA": meta, f"{info}/WHEEL": wheel}
    record = ""
    for path, text in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(text.encode())}\n"
    entries[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl", "w") as z:
        for path, text in entries.items():
            z.writestr(path, text)


@pytest.fixture
def local_index(tmp_path, monkeypatch):
    """uv installs from a folder of wheels only (no network), with no SEED to fetch."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setattr(environments, "SEED", ())
    return wheels


def _site(env_python: str) -> Path:
    (site,) = Path(env_python).parent.parent.glob("lib/python*/site-packages")
    return site


def _repository(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# -- Python: the repository's own release -------------------------------------------------------


@needs_311
def test_an_own_release_a_dependency_pulls_in_is_not_in_an_install_none_environment(tmp_path, local_index):
    _wheel(local_index, "widget", "9.9", {"widget/__init__.py": "WHERE = 'release 9.9: the fix'\n"})
    _wheel(local_index, "plugin", "1.0", {"plugin/__init__.py": "import widget\n"}, ("widget",))
    snapshot = _repository(
        tmp_path / "snapshot",
        {"pyproject.toml": '[project]\nname = "Widget"\n', "widget/__init__.py": "WHERE = 'snapshot'\n"},
    )
    env = Environments(tmp_path / "envs").ensure(EnvSpec(python="3.11", requirements=("plugin",)), snapshot)
    site = _site(env.python)
    assert (site / "plugin").is_dir()  # the dependency stays
    assert not (site / "widget").exists() and not list(site.glob("widget-*.dist-info"))
    # Imported as bootstrap.py orders the path (site-packages, then the snapshot): the snapshot's.
    probe = f"import sys; sys.path.append({str(snapshot)!r}); import plugin, widget; print(widget.WHERE)"
    out = subprocess.run([env.python, "-s", "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "snapshot", out.stderr


@needs_311
def test_an_own_release_under_another_distribution_name_is_removed_as_well(tmp_path, local_index):
    _wheel(local_index, "widget-fork", "9.9", {"widget/__init__.py": "WHERE = 'fork'\n"})
    snapshot = _repository(tmp_path / "snapshot", {"widget/__init__.py": "WHERE = 'snapshot'\n"})  # no metadata
    env = Environments(tmp_path / "envs").ensure(EnvSpec(python="3.11", requirements=("widget-fork",)), snapshot)
    assert not (_site(env.python) / "widget").exists() and not list(_site(env.python).glob("widget_fork-*"))


def test_an_own_release_is_removed_by_its_record_and_shared_namespaces_stay(tmp_path):
    from reward.execution import owncode  # here: the attacks above also run against older harnesses

    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"

    def dist(name: str, files: dict[str, str]) -> None:
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        record = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]
        (info / "RECORD").write_text("".join(f"{p},,\n" for p in record))
        for rel, text in files.items():
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_text(text)

    dist("Widget", {"widget/__init__.py": "", "widget/core.py": "", "../../../bin/widget": "#!python\n"})
    (site / "widget" / "__pycache__").mkdir()
    (site / "widget" / "__pycache__" / "core.cpython-311.pyc").write_text("")
    dist("zope.event", {"zope/event/__init__.py": ""})  # a namespace the snapshot shares
    dist("sloppy", {"sloppy/__init__.py": "", "tests/__init__.py": ""})  # ships a stray tests package
    dist("helper", {"helper/__init__.py": ""})
    (site / "helper" / "empty").mkdir()  # another package's folder: the removal never walks it
    snapshot = _repository(
        tmp_path / "snapshot",
        {"widget/__init__.py": "", "tests/__init__.py": "", "zope/interface/__init__.py": "", "setup.py": ""},
    )
    (snapshot / "zope" / "__init__.py").write_text("__import__('pkg_resources').declare_namespace(__name__)\n")
    names, portions = owncode.import_names(snapshot, ["."])
    assert (names, portions) == (["setup", "tests", "widget"], ["zope"])
    removed = owncode.remove_python(site, ["widget"], names, portions)
    assert sorted(p.name for p in site.iterdir()) == [
        "helper", "helper-1.0.dist-info", "sloppy", "sloppy-1.0.dist-info", "zope", "zope.event-1.0.dist-info",
    ]  # fmt: skip
    assert (site / "zope" / "event" / "__init__.py").is_file() and not (venv / "bin" / "widget").exists()
    assert (site / "helper" / "empty").is_dir()
    assert removed == [
        "Widget-1.0.dist-info (the repository's own distribution)",
        "tests (a package of the snapshot's)",
    ]


def test_an_own_package_the_project_venv_holds_refuses_python_host(tmp_path):
    snapshot = _repository(tmp_path / "snapshot", {"pytest/__init__.py": "FORGED = True\n"})
    with pytest.raises(EnvironmentFailed, match="holds the snapshot's own code .*pytest"):
        Environments(tmp_path / "envs").ensure(EnvSpec(), snapshot)
    plain = _repository(tmp_path / "plain", {"calc/__init__.py": ""})
    assert Environments(tmp_path / "envs").ensure(EnvSpec(), plain).key == "host"


# -- Python: requirement forms the host's uv would read as paths or URLs --------------------------


@needs_311
@pytest.mark.parametrize(
    "form",
    ["-e /etc", "--find-links /root", "-r ../outside.txt", "file:///etc/passwd", "evil @ file:///root",
     "evil @ git+file:///root/repo", "git+https://example.invalid/x.git", "./local", "/srv/pkg",
     "--index-url http://example.invalid", "evil-1.0-py3-none-any.whl", "evil-1.0.tar.gz"],
)  # fmt: skip
def test_a_manifest_naming_a_path_or_url_as_a_python_requirement_is_refused(tmp_path, local_index, form):
    with pytest.raises(EnvironmentFailed, match="refused|not a requirement"):
        Environments(tmp_path / "envs").ensure(EnvSpec(python="3.11", requirements=(form,)))


def test_a_manifest_naming_a_host_file_in_a_requirements_include_or_link_reads_nothing_of_it(tmp_path):
    secret = tmp_path / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("leaked-name-xyz\n")
    snapshot = _repository(
        tmp_path / "snapshot", {"requirements-dev.txt": f"-r {secret}\n-r ../host/secret.txt\nsix\n"}
    )
    (snapshot / "requirements-test.txt").symlink_to(secret)
    (snapshot / "requirements").symlink_to(secret.parent, target_is_directory=True)
    reqs, _ = declared.test_requirements(snapshot, ("requirements/secret.txt",))
    assert reqs == ["six"]


# -- Node: the repository's own release -----------------------------------------------------------


def _tarball(path: Path, files: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{name}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))


@needs_node
def test_an_own_release_a_dependency_bundles_is_replaced_by_a_link_to_the_snapshot(tmp_path):
    root = _repository(tmp_path / "snapshot", {"index.js": "module.exports = 'snapshot';\n"})
    helper = root / "vendor" / "helper-1.0.0.tgz"
    _tarball(
        helper,
        {
            "package.json": json.dumps(
                {
                    "name": "helper",
                    "version": "1.0.0",
                    "dependencies": {"calc": "^2.0.0"},
                    "bundleDependencies": ["calc"],
                }
            ),
            "index.js": "module.exports = require('calc');\n",
            "node_modules/calc/package.json": json.dumps({"name": "calc", "version": "2.0.0"}),
            "node_modules/calc/index.js": "module.exports = 'release 2.0.0: the fix';\n",
        },
    )
    package = {"name": "calc", "version": "1.0.0", "dependencies": {"helper": "file:vendor/helper-1.0.0.tgz"}}
    (root / "package.json").write_text(json.dumps(package))
    (root / "package-lock.json").write_text(jsrepos.lock_for(json.dumps(package), {"vendor/helper-1.0.0.tgz": helper}))
    spec = EnvSpec(node="host", install="lock", runner="node-test")
    with jsrepos.offline_npm():
        env = Environments(tmp_path / "envs").ensure(spec, root)
    modules = Path(env.layers[0]) / "node_modules"
    assert (modules / "helper" / "index.js").is_file()
    assert not (modules / "helper" / "node_modules" / "calc").exists()
    assert os.readlink(modules / "calc") == ".."  # /testbed/node_modules/calc -> /testbed


def test_an_own_release_in_any_node_modules_layout_is_removed_and_workspace_links_stay(tmp_path):
    from reward.execution import owncode

    layer = tmp_path / "layer"
    for rel in (
        "node_modules/calc",
        "node_modules/dep/node_modules/calc",
        "node_modules/.pnpm/@s+ws@2.0.0/node_modules/@s/ws",
    ):
        (layer / rel).mkdir(parents=True)
        (layer / rel / "package.json").write_text("{}")
    (layer / "node_modules" / "@s").mkdir()
    (layer / "node_modules" / "@s" / "ws").symlink_to("../.pnpm/@s+ws@2.0.0/node_modules/@s/ws")  # a copy
    (layer / "node_modules" / "tool").symlink_to("../packages/tool")  # a workspace of the repository
    removed = owncode.remove_js(layer, {"calc": ".", "@s/ws": "packages/ws", "tool": "packages/tool"})
    assert sorted(removed) == [
        "node_modules/.pnpm/@s+ws@2.0.0/node_modules/@s/ws", "node_modules/@s/ws", "node_modules/calc",
        "node_modules/dep/node_modules/calc",
    ]  # fmt: skip
    assert os.readlink(layer / "node_modules" / "calc") == ".."
    assert os.readlink(layer / "node_modules" / "@s" / "ws") == "../../packages/ws"
    assert os.readlink(layer / "node_modules" / "tool") == "../packages/tool"


# -- Node: manifests and lock files naming host paths or other sources ---------------------------


def _host_install(root: Path, tmp_path: Path) -> str:
    with jsrepos.offline_npm():
        return node.host_install(root, tmp_path / "dest", None, tmp_path / "tools", 120)


@needs_node
@pytest.mark.parametrize("form", ["file:{secret}", "file:{secret_dir}", "git+file://{secret_dir}", "{secret}"])
def test_a_manifest_naming_a_root_only_host_path_copies_nothing_into_node_modules(tmp_path, form):
    outside = tmp_path / "root-only"
    (outside / "dir").mkdir(parents=True)
    _tarball(outside / "secret.tgz", {"package.json": '{"name": "secret", "version": "1.0.0"}', "key.txt": "KEY"})
    (outside / "dir" / "package.json").write_text('{"name": "secret", "version": "1.0.0"}')
    (outside / "dir" / "key.txt").write_text("KEY")
    subprocess.run(["git", "init", "-q", str(outside / "dir")], check=True)
    subprocess.run(["git", "-C", str(outside / "dir"), "add", "."], check=True)
    subprocess.run(
        ["git", "-C", str(outside / "dir"), "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "x"],
        check=True,
    )
    outside.chmod(0o700)
    spec = form.format(secret=outside / "secret.tgz", secret_dir=outside / "dir")
    root = _repository(
        tmp_path / "snapshot", {"package.json": json.dumps({"name": "calc", "dependencies": {"secret": spec}})}
    )
    with pytest.raises(RuntimeError, match="dependencies.secret"):
        _host_install(root, tmp_path)
    assert not list((tmp_path / "dest").rglob("key.txt"))


@pytest.mark.parametrize(
    "spec",
    ["file:../outside", "link:../../etc", "github:someone/repo", "someone/repo", "https://example.invalid/x.tgz",
     "git://example.invalid/x.git", "~/x", "../x.tgz", "npm:other@git+https://example.invalid/x.git",
     "workspace:../../outside"],
)  # fmt: skip
def test_a_manifest_naming_a_path_outside_or_a_url_is_refused_before_the_host_step_runs(tmp_path, spec):
    for field in ("devDependencies", "overrides", "peerDependencies"):
        root = _repository(tmp_path / field, {"package.json": json.dumps({"name": "calc", field: {"x": spec}})})
        with pytest.raises(RuntimeError, match=f"{field}.x = "):
            _host_install(root, tmp_path / f"{field}-out")
        assert not (tmp_path / f"{field}-out" / "dest" / "package.json").exists()  # nothing copied, nothing ran


@pytest.mark.parametrize(
    ("lock", "text"),
    [
        ("package-lock.json", {"lockfileVersion": 3, "packages": {"node_modules/x": {"resolved": "git+file:///root/repo"}}}),
        ("package-lock.json", {"lockfileVersion": 3, "packages": {"node_modules/x": {"resolved": "file:/root/x.tgz"}}}),
        ("package-lock.json", {"lockfileVersion": 3, "packages": {"../outside": {"name": "x"}}}),
        ("package-lock.json", {"lockfileVersion": 1, "dependencies": {"x": {"version": "file:../../root"}}}),
        ("package-lock.json", {"lockfileVersion": 3, "packages": {"node_modules/x": {"resolved": "https://evil.invalid/x/-/x-1.0.0.tgz"}}}),
        ("yarn.lock", '# yarn lockfile v1\n\nx@^1.0.0:\n  version "1.0.0"\n  resolved "file:../../root/x.tgz"\n'),
        ("yarn.lock", '# yarn lockfile v1\n\n"x@git+file:///root/repo":\n  version "1.0.0"\n'),
        ("pnpm-lock.yaml", "lockfileVersion: '9.0'\npackages:\n  x@1.0.0:\n    resolution: {tarball: file:/root/x.tgz}\n"),
        ("pnpm-lock.yaml", "lockfileVersion: '9.0'\npackages:\n  x@1.0.0:\n    resolution: {commit: abc, repo: /root/repo, type: git}\n"),
        ("pnpm-lock.yaml", "lockfileVersion: '9.0'\nimporters:\n  .:\n    dependencies:\n      x:\n        version: link:../../root\n"),
    ],
)  # fmt: skip
def test_a_manifest_naming_a_host_path_or_url_in_a_lock_file_is_refused(tmp_path, lock, text):
    root = _repository(
        tmp_path / "snapshot",
        {
            "package.json": json.dumps({"name": "calc", "dependencies": {"x": "^1.0.0"}}),
            lock: text if isinstance(text, str) else json.dumps(text),
        },
    )
    with pytest.raises(RuntimeError, match=lock.replace(".", r"\.")):
        _host_install(root, tmp_path)


def test_a_manifest_naming_a_pnpmfile_or_a_vendored_tarball_through_a_link_is_refused(tmp_path):
    root = _repository(
        tmp_path / "snapshot",
        {
            "package.json": json.dumps({"name": "calc"}),
            "pnpm-workspace.yaml": "packages:\n  - p/*\npnpmfile: /root/hook.cjs\n",
        },
    )
    with pytest.raises(RuntimeError, match="pnpmfile"):
        _host_install(root, tmp_path / "a")
    outside = tmp_path / "outside"
    _tarball(outside / "dep-1.0.0.tgz", {"package.json": '{"name": "dep", "version": "1.0.0"}'})
    linked = _repository(
        tmp_path / "linked", {"package.json": json.dumps({"dependencies": {"dep": "file:vendor/dep-1.0.0.tgz"}})}
    )
    (linked / "vendor").symlink_to(outside, target_is_directory=True)
    assert node.vendored(linked) == []
    with pytest.raises(RuntimeError, match="outside the repository"):
        _host_install(linked, tmp_path / "b")


def test_an_honest_manifest_with_registry_aliases_workspaces_and_vendored_files_passes_the_check(tmp_path):
    from reward.execution import jssources

    manifest = {
        "name": "calc",
        "workspaces": ["packages/*"],
        "dependencies": {"a": "^1.2.0", "b": "latest", "c": "npm:other@~2.0.0", "d": "", "e": ">=1 <3 || 4.x"},
        "devDependencies": {"v": "file:vendor/v-1.0.0.tgz", "w": "file:packages/w", "k": "workspace:*"},
        "overrides": {"a": {".": "1.2.3", "f": "$a"}},
    }
    lock = {
        "lockfileVersion": 3,
        "packages": {
            "": {"name": "calc"},
            "packages/w": {"name": "w"},
            "node_modules/w": {"resolved": "packages/w", "link": True},
            "node_modules/a": {"version": "1.2.3", "resolved": "https://registry.npmjs.org/a/-/a-1.2.3.tgz"},
            "node_modules/@s/b": {"version": "1.0.0", "resolved": "https://registry.yarnpkg.com/@s/b/-/b-1.0.0.tgz"},
            "node_modules/v": {"version": "1.0.0", "resolved": "file:vendor/v-1.0.0.tgz"},
        },
    }
    root = _repository(
        tmp_path / "snapshot",
        {"package.json": json.dumps(manifest), "package-lock.json": json.dumps(lock), "packages/w/package.json": "{}"},
    )
    _tarball(root / "vendor" / "v-1.0.0.tgz", {"package.json": "{}"})
    jssources.check(root, ["package.json", "packages/w/package.json"], "package-lock.json")  # no error


def test_a_manifest_naming_a_host_file_through_a_linked_nvmrc_reads_nothing_of_it(tmp_path):
    from reward.execution import jsenv

    secret = tmp_path / "host" / "secret"
    secret.parent.mkdir()
    secret.write_text("16.20.2\n")  # read as a pin, its text would reach the candidates' names (the dataset)
    package = {"name": "calc", "devDependencies": {"jest": "^29.0.0"}, "scripts": {"test": "jest"}}
    root = _repository(tmp_path / "snapshot", {"package.json": json.dumps(package)})
    (root / ".nvmrc").symlink_to(secret)
    (root / ".node-version").symlink_to(secret)
    found = jsenv.js_candidates(root, "2024-06-01T00:00:00Z", "unit/calc")
    assert found and not any("16.20.2" in why for why, _ in found)
