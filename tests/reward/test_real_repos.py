"""Running real repositories' tests: derived environments, interpreters, clones by name, SWE-bench rows.

CPU-only and offline (nothing is installed: environment builds need PyPI and are measured in
docs/benchmarks.md instead). Skipped with a reason where ../shared/data, a clone of a SWE-bench
repository (a mirror `<owner>+<name>/repo` under $SWE_RL_MIRRORS, default ../.mirror) or root
(the sandbox) is absent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from data.build import BuildConfig, resolve_sources
from data.fixtures.synthetic import RepoBuilder, write_tree
from data.git.repo import parse_clone
from data.loader import read_instances
from data.schema import Instance
from data.validate import label
from reward.execution import environments, pythons, sandbox
from reward.execution.environments import EnvSpec, derive_spec
from reward.execution.snapshots import Snapshots, clone_map

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
MIRRORS = Path(os.environ.get("SWE_RL_MIRRORS", ROOT.parent / ".mirror"))
DEV_ROWS = DATA / "swebench_dev_rows.json"


@pytest.fixture
def here(monkeypatch):
    """This machine has 3.9, 3.10 and 3.11 (derive_spec's choice must not depend on the host)."""
    monkeypatch.setattr(environments, "installed_for", lambda when, days=0: ("3.9", "3.10", "3.11"))


def test_derive_spec_reads_what_a_synthetic_repository_declares(tmp_path, here):
    repo = RepoBuilder(tmp_path / "repo", origin_url="https://github.com/acme/widget.git")
    repo.commit(
        {
            "setup.cfg": "[metadata]\nname = widget\n[options]\npython_requires = >=3.10\n"
            "[options.extras_require]\ntest = pytest-mock\nfast = ujson\n",
            "setup.py": "from setuptools import setup\nsetup()\n",
            "requirements-dev.txt": "-e .[socks]\n-r requirements/base.txt\npytest>=6,<8  # the runner\n"
            "--index-url https://example.invalid\nhypothesis; python_version >= '3.8'\n",
            "requirements/base.txt": "attrs==21.4.0\n-r ../requirements-dev.txt\n",
            "src/widget/__init__.py": "",
            "tests/test_w.py": "def test():\n    pass\n",
        },
        "Initial commit",
    )
    spec = derive_spec(repo.path, "2022-03-01T10:00:00+02:00", "acme/widget")
    assert spec == EnvSpec(
        snapshot="git",
        python="3.10",  # the oldest installed that python_requires admits
        requirements=("attrs==21.4.0", "pytest>=6,<8", "hypothesis; python_version >= '3.8'"),
        install="snapshot",
        extras=("socks", "test"),
        exclude_newer="2022-03-01T08:00:00Z",  # the commit's date in UTC
        pythonpath=("src",),
    )


def test_derive_spec_without_python_requires_takes_the_python_of_the_commits_time(tmp_path, here):
    snapshot = write_tree(tmp_path, {"setup.py": "setup(name='old')\n", "old.py": ""})
    spec = derive_spec(snapshot, "2021-12-24T00:00:00Z", "acme/old")
    # 3.10 was out 81 days then: the newest out for candidates.MATURE_DAYS comes first.
    assert (spec.python, spec.requirements, spec.pythonpath, spec.extras) == ("3.9", ("pytest",), (".",), ())
    assert derive_spec(snapshot, "2022-03-01T00:00:00Z", "acme/old").python == "3.10"
    # A commit older than every installed interpreter: the oldest, resolved as of its release.
    spec = derive_spec(snapshot, "2012-09-13T06:36:36Z", "acme/old")
    assert (spec.python, spec.exclude_newer) == ("3.9", "2020-10-05T00:00:00Z")


def test_a_project_whose_tests_download_their_data_gets_the_data_package_undated(tmp_path, here, monkeypatch):
    spec = derive_spec(
        write_tree(tmp_path, {"setup.py": "setup(name='pydicom')\n"}), "2021-08-04T15:22:07Z", "pydicom/pydicom"
    )
    assert spec.undated == ("pydicom-data",) and spec.exclude_newer == "2021-08-04T15:22:07Z"
    assert EnvSpec.from_json(spec.to_json()) == spec
    # The build holds every package to the date but the undated ones, in one resolution.
    envs, calls = environments.Environments(tmp_path / "envs"), []

    def tool(cmd, what):
        calls.append(cmd)
        if "venv" in cmd:
            Path(cmd[-1]).mkdir(parents=True)

    monkeypatch.setattr(envs, "_tool", tool)
    monkeypatch.setattr(environments, "find_python", lambda version: "/usr/bin/python3")
    spec = EnvSpec(
        python="3.9", requirements=("pytest",), exclude_newer="2021-08-04T15:22:07Z", undated=("pydicom_data",)
    )
    envs._build(spec, None, tmp_path / "envs" / "key")
    install = calls[1]
    assert install[install.index("--exclude-newer") + 1] == "2021-08-04T15:22:07Z"
    exempt = install[install.index("--exclude-newer-package") + 1]
    assert exempt.startswith("pydicom-data=") and exempt > "pydicom-data=2026"
    assert {"pytest", "pydicom_data"} <= set(install)


def test_the_own_distribution_loses_its_code_and_keeps_its_metadata(tmp_path):
    """The code under test is the snapshot's; the version and entry points stay readable (sqlfluff
    reads its version with importlib.metadata at import time and finds its rules by entry point).
    The build's output was written by the snapshot's code: a link in it is never followed."""
    import importlib.metadata

    out, site = tmp_path / "out", tmp_path / "venv" / "lib" / "python3.9" / "site-packages"
    site.mkdir(parents=True)
    files = {
        "widget/__init__.py": "X = 'installed copy'\n",
        "bin/widget": "#!python\n",
        "widget-1.2.dist-info/METADATA": "Metadata-Version: 2.1\nName: widget\nVersion: 1.2\n",
        "widget-1.2.dist-info/entry_points.txt": "[widget.plugins]\ncore = widget.core\n",
        "widget-1.2.dist-info/licenses/LICENSE": "MIT\n",
        "widget-1.2.dist-info/RECORD": "widget/__init__.py,,\n",
        "widget-1.2.dist-info/licenses/a/b/c/d/DEEP": "a folder too deep is not entered\n",
    }
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_text("host only\n")
    (out / "widget-1.2.dist-info" / "leak").symlink_to(secret / "key")
    (out / "widget-1.2.dist-info" / "folder").symlink_to(secret)
    environments._install_metadata(out, site)
    info = site / "widget-1.2.dist-info"
    assert sorted(p.name for p in site.iterdir()) == ["widget-1.2.dist-info"]
    assert sorted(str(p.relative_to(info)) for p in info.rglob("*")) == [
        "METADATA",
        "RECORD",
        "entry_points.txt",
        "licenses",
        "licenses/LICENSE",
    ]
    dist = importlib.metadata.PathDistribution(info)
    assert dist.version == "1.2" and [e.value for e in dist.entry_points] == ["widget.core"]
    # One .dist-info folder, a real one: else the build is refused.
    (out / "other-1.0.dist-info").mkdir()
    with pytest.raises(environments.EnvironmentFailed, match="expected one .dist-info folder"):
        environments._install_metadata(out, site)
    for name in ("other-1.0.dist-info", "widget-1.2.dist-info"):
        shutil.rmtree(out / name)
    (out / "widget-1.2.dist-info").symlink_to(secret)
    with pytest.raises(environments.EnvironmentFailed, match="expected one .dist-info folder"):
        environments._install_metadata(out, site)


def test_what_the_host_installs_is_a_requirement_of_the_index_by_name():
    """The requirements a sandboxed build printed are hostile text: one with a URL or a path
    would be built as root by uv; anything but a JSON list of requirements is refused."""
    got = environments._requirements('["six>=1.0", "attrs[tests]; python_version >= \'3\'"]', "the snapshot's")
    assert got == ["six>=1.0", 'attrs[tests]; python_version >= "3"']
    for text, why in (
        ('["evil @ file:///etc"]', "'evil @ file:///etc' installs from file:///etc, not from the index: refused"),
        ('["x @ https://h/x.tar.gz"]', "installs from https://h/x.tar.gz"),
        ('["--index-url=https://evil"]', "is not a requirement"),
        ('{"six": 1}', "not a JSON list"),
        ("[1]", "not a requirement: 1"),
        ('["' + "a" * 2000 + '"]', "not a requirement"),
        ("[" + ",".join(['"six"'] * 3000) + "]", "not a JSON list of at most 2000"),
    ):
        with pytest.raises(environments.EnvironmentFailed, match=re.escape(why)):
            environments._requirements(text, "the snapshot's")


def test_test_ids_name_the_environment_the_same_way_on_every_node():
    """requests parametrizes a test by pytest's own path in site-packages: labels made with one
    cache_dir must match runs with another."""
    from reward.execution.runner import stable_ids

    test = "tests/test_utils.py::TestExtractZippedPaths::test_unzipped_paths_unchanged[{}]"
    site = "lib/python3.10/site-packages/pytest/__init__.py"
    ids = [
        stable_ids(
            {test.format(f"{root}/envs/3527006ba9151a3d/{site}"): "passed"}, (f"{root}/envs/3527006ba9151a3d", "/usr")
        )
        for root in ("/tmp/rr/cache", "/data/cache")
    ]
    assert ids[0] == ids[1] == {test.format(f"{{env}}/{site}"): "passed"}
    # The interpreter's prefix too, the longer prefix first; ids without them are untouched.
    got = stable_ids({"t[/opt/py/lib/a.py]": "failed", "t[x]": "passed"}, ("/opt/py/venv", "/opt/py"))
    assert got == {"t[{python}/lib/a.py]": "failed", "t[x]": "passed"}


def test_derive_spec_of_a_tree_without_a_project_installs_nothing(tmp_path, here):
    spec = derive_spec(write_tree(tmp_path, {"lib.py": "", "test_lib.py": ""}), None, "acme/lib")
    assert (spec.install, spec.requirements, spec.exclude_newer, spec.python) == ("none", ("pytest",), None, "3.9")


def test_find_python_searches_the_declared_prefixes_and_skips_a_wrong_version(tmp_path, monkeypatch):
    good, bad = tmp_path / "good" / "usr" / "bin", tmp_path / "bad" / "bin"
    for where, says in ((good, "3.99"), (bad, "3.98")):
        where.mkdir(parents=True)
        (where / "python3.99").write_text(f"#!/bin/sh\necho {says}\n")
        (where / "python3.99").chmod(0o755)
    monkeypatch.setenv(pythons.PYTHONS_VAR, f"{tmp_path / 'bad'}:{tmp_path / 'good'}")
    assert pythons.find_python("3.99") == str(good / "python3.99")
    monkeypatch.setenv(pythons.PYTHONS_VAR, str(tmp_path / "bad"))
    with pytest.raises(pythons.InterpreterUnavailable, match="scripts/debian_python.sh"):
        pythons.find_python("3.99")


@pytest.mark.skipif(sandbox.available() is not None, reason=str(sandbox.available()))
@pytest.mark.skipif(not Path("/opt/python3.9/usr/bin/python3.9").exists(), reason="no /opt/python3.9 here")
def test_a_private_prefix_interpreter_runs_in_the_sandbox_with_its_own_libraries(tmp_path):
    python = "/opt/python3.9/usr/bin/python3.9"
    prefix = environments._base_prefix(python)
    code = "import ssl, ctypes, decimal, sys; print(sys.version_info[:2], ssl.OPENSSL_VERSION.split()[1])"
    result = sandbox.run([python, "-c", code], snapshot=tmp_path, ro_paths=(prefix,), env={"PATH": "/usr/bin"})
    assert (result.returncode, result.stdout.strip()) == (0, "(3, 9) 1.1.1w"), result.stderr


@pytest.mark.skipif(sandbox.available() is not None, reason=str(sandbox.available()))
def test_an_environment_under_the_hosts_tmp_is_visible_and_tmp_stays_private(tmp_path):
    env = tmp_path / "env"  # pytest's tmp_path lies under /tmp, as a test's cache does
    env.mkdir()
    (env / "marker").write_text("built\n")
    env.chmod(0o755)
    script = f"cat {env}/marker; echo x > /tmp/mine && echo writable; echo y > {env}/other || echo read-only"
    result = sandbox.run(["/bin/sh", "-c", script], snapshot=tmp_path, ro_paths=(str(env),), env={"PATH": "/bin"})
    assert result.stdout.split() == ["built", "writable", "read-only"], result.stderr
    assert sorted(p.name for p in env.iterdir()) == ["marker"]


_LOOPBACK_PROBE = """
import socket, sys
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
client = socket.create_connection(server.getsockname(), timeout=2)
conn, _ = server.accept()
client.sendall(b"ok")
print(conn.recv(2).decode())
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    print("reached the host")
except OSError as exc:
    print(type(exc).__name__)
"""


@pytest.mark.skipif(sandbox.available() is not None, reason=str(sandbox.available()))
def test_with_loopback_a_local_server_works_and_the_hosts_loopback_stays_unreachable(tmp_path):
    import socket
    import sys

    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen()
    host.settimeout(0.5)
    port = host.getsockname()[1]
    env = {"PATH": "/usr/bin:/bin"}
    prefixes = (sys.prefix, sys.base_prefix)
    argv = [sys.executable, "-c", _LOOPBACK_PROBE, str(port)]
    try:
        result = sandbox.run(argv, snapshot=tmp_path, ro_paths=prefixes, env=env, loopback=True)
        assert result.stdout.split() == ["ok", "ConnectionRefusedError"], result.stderr
        with pytest.raises(TimeoutError):
            host.accept()
        # Without it (the default) the loopback is down: not even a server of its own.
        result = sandbox.run(argv, snapshot=tmp_path, ro_paths=prefixes, env=env)
        assert result.returncode != 0 and "OSError" in result.stderr, result.stderr
    finally:
        host.close()


def test_derive_spec_gives_the_loopback_to_suites_with_a_local_server(tmp_path, here):
    snapshot = write_tree(tmp_path, {"setup.py": "", "requirements-dev.txt": "pytest-httpbin==2.1.0\n"})
    assert derive_spec(snapshot, None, "acme/served").network == "loopback"
    (tmp_path / "requirements-dev.txt").write_text("pytest\n")
    assert derive_spec(snapshot, None, "acme/served").network == "none"


def test_parse_clone_reads_owner_name_equals_path(tmp_path):
    assert parse_clone("psf/requests=/m/psf+requests/repo") == ("psf/requests", Path("/m/psf+requests/repo"))
    assert parse_clone("/clones/requests") == (None, Path("/clones/requests"))
    odd = tmp_path / "a=b"  # an existing path with "=" in it stays a path
    odd.mkdir()
    assert parse_clone(str(odd)) == (None, odd)


def _bare_mirror(tmp_path: Path) -> tuple[Path, str]:
    """A bare clone named "repo" with no origin remote, as the fetched mirrors are."""
    work = RepoBuilder(tmp_path / "work")
    commit = work.commit({"widget.py": "X = 1\n", "tests/test_w.py": "def test():\n    pass\n"}, "Initial commit")
    mirror = tmp_path / "acme+widget" / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(work.path), str(mirror)], check=True)
    subprocess.run(["git", "-C", str(mirror), "remote", "remove", "origin"], check=True)
    return mirror, commit


def test_clone_map_names_a_mirror_and_the_named_entry_wins(tmp_path):
    mirror, _ = _bare_mirror(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    clones = clone_map([str(mirror), f"acme/widget={mirror}", f"acme/other={other}"])
    assert clones["acme/widget"] == mirror and clones["acme/other"] == other
    assert clones["repo"] == mirror  # unnamed: only the uninformative directory name
    assert clone_map([f"acme/widget={other}", str(mirror)])["acme/widget"] == other


@pytest.mark.skipif(os.geteuid() != 0, reason="snapshots are given to the sandbox's user (root needed)")
def test_a_snapshot_comes_from_the_clone_named_for_its_repository(tmp_path):
    mirror, commit = _bare_mirror(tmp_path)
    inst = Instance("acme__widget-1", "acme/widget", commit, "issue", "", None, {}, {})
    snapshots = Snapshots(tmp_path / "cache", [f"acme/widget={mirror}"])
    path = snapshots.path(inst, EnvSpec(snapshot="git"))
    assert sorted(p.name for p in path.rglob("*.py")) == ["test_w.py", "widget.py"]
    assert (path / "widget.py").read_text() == "X = 1\n"


def test_data_build_takes_the_repository_name_from_the_git_entry(tmp_path):
    mirror, _ = _bare_mirror(tmp_path)
    sources = resolve_sources(BuildConfig(git=(f"acme/widget={mirror}",), out=str(tmp_path / "out")))
    assert [(s["repo"], s["git"]) for s in sources] == [("acme/widget", str(mirror))]


def test_no_fail_to_pass_says_which_tests_failed_on_the_network():
    run = lambda outcomes, failures=None: SimpleNamespace(  # noqa: E731
        status="ok", reason=None, outcomes=outcomes, failures=failures or {}
    )
    before = run({"t.py::a": "failed", "t.py::b": "passed"})
    error = "requests.exceptions.ConnectionError: HTTPConnectionPool(host='127.0.0.1', port=5000): Max retries"
    after = run({"t.py::a": "failed", "t.py::b": "passed"}, {"t.py::a": error})
    lab = label(before, [after, after])
    assert (lab.outcome, lab.pass_to_pass) == ("no_fail_to_pass", ("t.py::b",))
    assert "after the fix 1 of 2 do not pass, 1 on the network (e.g. t.py::a: requests.exceptions" in lab.reason


# --- SWE-bench rows (../shared/data/swebench_dev_rows.json) --------------------------------------

needs_rows = pytest.mark.skipif(not DEV_ROWS.is_file(), reason=f"{DEV_ROWS} not found")


def _rows() -> list[dict]:
    return json.loads(DEV_ROWS.read_text())


@needs_rows
def test_swebench_specs_become_environments():
    from data.swebench_exec import environment, spec_for
    from reward.execution import repos

    specs = repos.swebench_specs()
    requirements_dev = "flake8\n-r requirements.txt\ntypes-pkg_resources\npytest\n-e .\n"
    files = {"requirements_dev.txt": requirements_dev, "requirements.txt": "click>=7.1\n"}
    got = {}
    for row in _rows():
        spec = spec_for(specs, row["repo"], row["version"])
        env = environment(spec, specs[row["repo"]]["requirements_paths"], files.get, row["created_at"])
        got[row["instance_id"]] = (env.python, env.requirements, env.install, env.exclude_newer)
    assert got == {
        "pydicom__pydicom-1458": ("3.9", ("numpy", "pytest"), "snapshot", "2021-08-04T15:22:07Z"),
        "pydicom__pydicom-1194": ("3.8", ("numpy", "pytest"), "snapshot", "2020-09-22T03:16:19Z"),
        "pylint-dev__astroid-1268": ("3.9", ("pytest",), "snapshot", "2021-11-21T16:15:23Z"),
        # requirements_dev.txt with its -r; the yanked types-pkg_resources swapped as the harness does
        "sqlfluff__sqlfluff-2386": (
            "3.9",
            ("flake8", "click>=7.1", "types-setuptools", "pytest"),
            "snapshot",
            "2022-01-21T00:03:48Z",
        ),
    }


def _mirror(repo: str) -> Path:
    return MIRRORS / repo.replace("/", "+") / "repo"


@needs_rows
def test_the_converter_carries_the_official_labels_and_environment_over(tmp_path):
    from data.swebench_exec import convert

    repos = sorted({row["repo"] for row in _rows()})
    missing = [r for r in repos if not _mirror(r).is_dir()]
    if missing:
        pytest.skip(f"no clone of {missing} under {MIRRORS}")
    manifest = convert([str(DEV_ROWS)], [f"{r}={_mirror(r)}" for r in repos], str(tmp_path / "out"), [], False)
    assert (manifest["instances"], manifest["counts"]) == (4, {"duplicate": 1, "kept": 4})  # astroid-1268 twice
    got = {i.instance_id: i for i in read_instances(str(tmp_path / "out"), 0)}
    for row in _rows():
        inst = got[row["instance_id"]]
        assert inst.fail_to_pass == tuple(row["FAIL_TO_PASS"]) and len(inst.fail_to_pass) >= 1
        assert inst.pass_to_pass == tuple(row["PASS_TO_PASS"])
        assert (inst.base_commit, inst.test_patch, inst.patch) == (row["base_commit"], row["test_patch"], row["patch"])
    env = EnvSpec.from_json(got["sqlfluff__sqlfluff-2386"].environment)
    assert env is not None and (env.python, env.pythonpath, env.install) == ("3.9", ("src",), "snapshot")
    assert {"pytest", "hypothesis", "types-setuptools"} <= set(env.requirements)
    for instance_id, undated in (("pydicom__pydicom-1458", ("pydicom-data",)), ("pylint-dev__astroid-1268", ())):
        env = EnvSpec.from_json(got[instance_id].environment)
        assert env is not None and env.undated == undated


# --- SWE-bench Lite rows as a user has them (../shared/data/swebench_lite.json) ------------------

LITE = DATA / "swebench_lite.json"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=ROOT, timeout=900)


def _lite_row(repo: str, instance_id: str, tmp_path: Path) -> tuple[dict, str]:
    """One Lite row converted by `data.swebench_exec` into tmp_path/exec (skips without the
    data or the clone): the row and its `--git` argument."""
    if not LITE.is_file() or not _mirror(repo).is_dir():
        pytest.skip(f"needs {LITE} and a clone of {repo} under {MIRRORS}")
    row = next(r for r in json.loads(LITE.read_text()) if r["instance_id"] == instance_id)
    (tmp_path / "rows.json").write_text(json.dumps([row]))
    git = f"{repo}={_mirror(repo)}"
    converted = _cli(
        "data.swebench_exec", "--rows", str(tmp_path / "rows.json"), "--git", git, "--out", str(tmp_path / "exec")
    )
    assert converted.returncode == 0, converted.stderr[-2000:]
    return row, git


def _validated_label(tmp_path: Path, git: str) -> dict:
    """`data.validate` of tmp_path/exec into tmp_path/val: the one instance's label."""
    validated = _cli(
        "data.validate",
        "--data",
        str(tmp_path / "exec"),
        "--out",
        str(tmp_path / "val"),
        f"reward.execution.repos=['{git}']",
    )
    assert validated.returncode == 0, validated.stderr[-2000:]
    (label,) = json.loads((tmp_path / "val" / "_labels.json").read_text())
    return label


@pytest.mark.skipif(sandbox.available() is not None, reason="no sandbox here")
def test_a_flask_lite_row_converts_validates_and_its_gold_patch_resolves(tmp_path):
    """Lite's export has no version, no test patch and no labels: the version comes from the
    commit, the test patch from the PR's ref (its changelog ignored), the labels from
    validation; the spec pins markupsafe twice and Werkzeug after the commit's date."""
    row, git = _lite_row("pallets/flask", "pallets__flask-4992", tmp_path)
    notes = json.loads((tmp_path / "exec" / "_manifest.json").read_text())["notes"]
    assert notes == {"version_from_clone": 1, "test_patch_from_pr_ref": 1, "non_code_files_ignored": 1}
    label = _validated_label(tmp_path, git)
    assert (label["outcome"], label["FAIL_TO_PASS"]) == ("kept", ["tests/test_config.py::test_config_from_file_toml"])
    gold = [{"instance_id": row["instance_id"], "model_name_or_path": "gold", "model_patch": row["golden_patch"]}]
    (tmp_path / "gold.json").write_text(json.dumps(gold))
    out = tmp_path / "report"
    ran = _cli(
        "reward.execute",
        "--instances",
        str(tmp_path / "val"),
        "--predictions",
        str(tmp_path / "gold.json"),
        "--out",
        str(out),
        f"reward.execution.repos=['{git}']",
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == [row["instance_id"]]


@pytest.mark.skipif(sandbox.available() is not None, reason="no sandbox here")
def test_a_sympy_lite_row_runs_under_the_harness_pytest(tmp_path):
    """SWE-bench runs sympy with `bin/test`; its suite also runs under pytest (its conftest.py
    makes sympy's XFAIL and SKIP pytest's), which sympy's row in repos.py adds to the environment. The PR's
    branch left master before the row's base commit: its test patch is taken from the merge
    base (`base...head`)."""
    _, git = _lite_row("sympy/sympy", "sympy__sympy-20590", tmp_path)
    (inst,) = read_instances(str(tmp_path / "exec"), 0)
    env = EnvSpec.from_json(inst.environment)
    assert env is not None and "pytest" in env.requirements and "mpmath==1.3.0" in env.requirements
    label = _validated_label(tmp_path, git)
    assert (label["outcome"], label["FAIL_TO_PASS"]) == ("kept", ["sympy/core/tests/test_basic.py::test_immutable"])


@pytest.mark.skipif(sandbox.available() is not None, reason="no sandbox here")
def test_a_requests_lite_row_whose_suite_calls_httpbin_org_is_kept_with_the_stand_in(tmp_path):
    """psf__requests-2317's suite (2014) sends its requests to http://httpbin.org: without a
    network its tests failed on name resolution and the row had no FAIL_TO_PASS. Its
    environment names the httpbin stand-in (its row's services, repos.py), served inside the sandbox."""
    _, git = _lite_row("psf/requests", "psf__requests-2317", tmp_path)
    (inst,) = read_instances(str(tmp_path / "exec"), 0)
    env = EnvSpec.from_json(inst.environment)
    assert env is not None and env.services == ("httpbin",)
    label = _validated_label(tmp_path, git)
    assert (label["outcome"], label["FAIL_TO_PASS"]) == (
        "kept",
        ["test_requests.py::TestTimeout::test_encoded_methods"],
    )
    assert len(label["PASS_TO_PASS"]) > 100  # 81 without the stand-in: the httpbin.org tests pass now


def test_the_snapshots_path_reaches_the_tests_own_subprocesses_and_not_the_test_process(tmp_path):
    """environments.IMPORT_PATH: a subprocess that sets its own PYTHONPATH still imports the code
    under test; the harness's test process (SWE_RL_REPORT_FD set) gets nothing from it."""
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    environments._import_path(tmp_path, EnvSpec(pythonpath=("src",)))
    assert oct((site / environments.IMPORT_PATH).stat().st_mode & 0o777) == "0o644"
    probe = f"import site, sys; site.addsitedir({str(site)!r}); print('/testbed/src' in sys.path)"
    plain = {k: v for k, v in os.environ.items() if k != "SWE_RL_REPORT_FD"}
    for extra, expected in (({}, "True"), ({"SWE_RL_REPORT_FD": "3"}, "False")):
        out = subprocess.run([sys.executable, "-c", probe], env={**plain, **extra}, capture_output=True, text=True)
        assert out.stdout.strip() == expected, out.stderr
