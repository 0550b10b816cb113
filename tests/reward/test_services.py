"""Stand-ins for public services (reward/execution/services.py): http://httpbin.org answered by
the httpbin package inside the sandbox's own network namespace, by name, while the host's
/etc/hosts and its unprivileged-port floor stay as they are; a stand-in that does not come up
fails the run with its reason, never as a silent test failure.

Needs the sandbox (root). The httpbin venv is built once per session from PyPI (skipped with
the reason where it cannot be); the failure cases need no build.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from conf.config import ExecutionConfig
from data.demo import load_demo_rows
from data.patching import make_patch
from data.schema import Instance
from reward.execution import sandbox, services
from reward.execution.environments import EnvironmentFailed, Environments, EnvSpec, InterpreterUnavailable
from reward.execution.runner import Runner, TestJob
from reward.execution.sandbox import NOBODY

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"no sandbox: {sandbox.available()}")

PORT_START = Path("/proc/sys/net/ipv4/ip_unprivileged_port_start")
# Run in the sandbox by the project's interpreter: GET a URL by name, print what came back.
FETCH = """
import json, os, socket, sys, urllib.request
try:
    print(json.dumps({"body": json.load(urllib.request.urlopen(sys.argv[1], timeout=5))}))
except OSError as exc:
    print(json.dumps({"error": repr(exc)}))
inside = {"port_start": open("/proc/sys/net/ipv4/ip_unprivileged_port_start").read().strip()}
# Where the sandbox's /etc/hosts comes from (mountinfo's root field) and the stand-ins' output.
inside["hosts_from"] = [f[3] for f in map(str.split, open("/proc/self/mountinfo")) if f[4] == "/etc/hosts"]
inside["server_out"] = []
for pid in [p for p in os.listdir("/proc") if p.isdigit() and p not in ("1", str(os.getpid()))]:
    try:
        inside["server_out"].append(os.readlink(f"/proc/{pid}/fd/1"))
    except OSError:
        pass
print(json.dumps(inside))
"""
HOST = (sys.executable, sys.prefix, sys.base_prefix)


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    """An execution cache with the httpbin stand-in's venv built in it (once a session)."""
    root = tmp_path_factory.mktemp("services")
    try:
        services.servers(("httpbin",), Environments(root / "envs"))
    except (EnvironmentFailed, InterpreterUnavailable) as exc:
        pytest.skip(f"the httpbin stand-in cannot be built here: {str(exc)[:300]}")
    return root


def _snapshot(tmp_path: Path) -> Path:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    return snapshot


def _fetch(tmp_path: Path, url: str, **kw) -> tuple[sandbox.SandboxResult, list[dict]]:
    result = sandbox.run([HOST[0], "-I", "-c", FETCH, url], snapshot=_snapshot(tmp_path), ro_paths=HOST[1:], **kw)
    return result, [json.loads(line) for line in result.stdout.splitlines()]


def test_httpbin_org_is_served_inside_the_sandbox_by_name_and_the_host_is_unchanged(cache, tmp_path):
    hosts, port_start = Path("/etc/hosts").read_bytes(), PORT_START.read_text()
    (server,) = services.servers(("httpbin",), Environments(cache / "envs"))
    result, lines = _fetch(tmp_path, "http://httpbin.org/get?probe=1", servers=[server])
    assert result.failed_server is None and result.returncode == 0, (result.failed_server, result.stderr[-2000:])
    fetched, inside = lines
    assert fetched["body"]["url"] == "http://httpbin.org/get?probe=1", fetched
    assert fetched["body"]["args"] == {"probe": "1"} and fetched["body"]["headers"]["Host"] == "httpbin.org"
    assert inside["port_start"] == "80"  # the namespace's own floor, lowered for the stand-in
    # Neither names a folder of the host: the hosts file lies in PID 1's own tmpfs, the output in memory.
    assert inside["hosts_from"] == ["/hosts"] and inside["server_out"] == ["/memfd:server-0 (deleted)"], inside
    assert Path("/etc/hosts").read_bytes() == hosts and PORT_START.read_text() == port_start


def test_without_the_stand_in_the_name_does_not_resolve(tmp_path):
    result, (fetched, inside) = _fetch(tmp_path, "http://httpbin.org/get", loopback=True)
    assert "error" in fetched and ("resolution" in fetched["error"] or "not known" in fetched["error"]), fetched
    assert inside["port_start"] == PORT_START.read_text().strip()


def test_a_subdomain_is_not_mapped(cache, tmp_path):
    """requests' tests expect a made-up name under httpbin.org to fail (test_connection_error)."""
    (server,) = services.servers(("httpbin",), Environments(cache / "envs"))
    _, (fetched, _) = _fetch(tmp_path, "http://fooobarbangbazbing.httpbin.org/get", servers=[server])
    assert "error" in fetched, fetched


def _server(code: str, start_s: float = 10.0) -> sandbox.Server:
    return sandbox.Server("broken", (HOST[0], "-I", "-c", code), 80, ("httpbin.org",), (), HOST[1:], start_s)


def test_a_stand_in_that_exits_fails_the_run_with_its_output(tmp_path):
    code = "import os, sys; print('broken stand-in, uid', os.getuid(), flush=True); sys.exit(3)"
    result, lines = _fetch(tmp_path, "http://httpbin.org/get", servers=[_server(code)])
    assert lines == [] and result.report == b""  # the command never ran
    assert result.failed_server is not None and "exited with status 3" in result.failed_server
    assert f"broken stand-in, uid {NOBODY}" in result.failed_server  # it ran as nobody, its output kept apart


def test_a_stand_in_that_never_listens_fails_the_run_in_its_time(tmp_path):
    result, lines = _fetch(tmp_path, "http://httpbin.org/get", servers=[_server("import time; time.sleep(60)", 1.0)])
    assert lines == [] and result.seconds < 10
    assert result.failed_server is not None and "did not accept on 127.0.0.1:80 within 1 s" in result.failed_server


# The runner: an instance whose environment names the stand-in, its test fetching httpbin.org.
TEST_FILE = """
import json, urllib.request

def test_httpbin_answers():
    body = json.load(urllib.request.urlopen("http://httpbin.org/anything/x", timeout=5))
    assert body["url"] == "http://httpbin.org/anything/x"
"""


def _job(names: tuple[str, ...]) -> TestJob:
    row = next(r for r in load_demo_rows() if r["instance_id"] == "demo__calspan-3")
    inst = dataclasses.replace(Instance.from_row(row), environment=EnvSpec(services=names).to_json())
    return TestJob(inst, "", test_patch=make_patch({}, {"tests/test_stand_in.py": TEST_FILE}))


def _runner(cache: Path) -> Runner:
    return Runner(ExecutionConfig(cache_dir=str(cache), wall_s=60.0, memory_mb=1024, pids=128, cpu_s=60))


def test_the_runner_serves_an_environments_services(cache):
    run = _runner(cache).run(_job(("httpbin",)))
    assert run.status == "ok", (run.reason, run.log[-2000:])
    assert run.outcomes["tests/test_stand_in.py::test_httpbin_answers"] == "passed", run.log[-2000:]


def test_an_unknown_service_is_an_environment_failure(tmp_path):
    run = _runner(tmp_path).run(_job(("no-such-service",)))
    assert run.status == "env_failed" and "unknown services ['no-such-service']" in (run.reason or "")


def test_services_leave_the_environments_key_and_json_as_they_were(tmp_path):
    envs, spec = Environments(tmp_path), EnvSpec(python="3.11", requirements=("pytest",))
    assert "services" not in json.loads(spec.to_json())  # every environment made before the field
    with_service = dataclasses.replace(spec, services=("httpbin",))
    assert EnvSpec.from_json(with_service.to_json()) == with_service
    assert envs.key(with_service, None) == envs.key(spec, None)  # its venv is the same one
