"""reward/execution/bootstrap.py's network note: a failing test that looked up or connected to
a host beyond the sandbox's loopback says so in its message, whatever its assertion says (a
link checker reports "broken", not the socket's error), so validation can name it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from data.validate import NETWORK_ERROR
from reward.execution import bootstrap

TESTS = """
import sys


def test_outside_name():
    sys.audit("socket.getaddrinfo", "www.example.com", 443, 0, 0, 0)  # the event only: no lookup
    assert "broken" == "working"


def test_loopback_only():
    sys.audit("socket.getaddrinfo", "localhost", 80, 0, 0, 0)
    sys.audit("socket.connect", None, ("127.0.0.1", 8080))
    assert "broken" == "working"


def test_outside_address():
    sys.audit("socket.connect", None, ("10.255.255.1", 80))
    assert False


def test_next_test_starts_clean():
    assert False
"""


def test_a_failing_test_that_tried_the_network_says_so(tmp_path: Path):
    (tmp_path / "test_links.py").write_text(TESTS)
    read, write = os.pipe()
    env = {**os.environ, "SWE_RL_REPORT_FD": str(write), "SWE_RL_PATH": str(tmp_path)}
    script = Path(bootstrap.__file__)
    args = [sys.executable, "-s", "-B", str(script), "-p", "no:cacheprovider", "-q", "test_links.py"]
    proc = subprocess.run(args, cwd=tmp_path, env=env, pass_fds=(write,), capture_output=True, timeout=120)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        records = [json.loads(line) for line in stream.read().splitlines()]
    assert proc.returncode == 1, proc.stdout[-2000:]
    messages = {r["id"].split("::")[-1]: r.get("message", "") for r in records if r.get("when") == "call"}
    assert messages["test_outside_name"].endswith(" [tried the network: www.example.com]")
    assert messages["test_outside_address"].endswith(" [tried the network: 10.255.255.1]")
    assert "tried the network" not in messages["test_loopback_only"] + messages["test_next_test_starts_clean"]
    assert NETWORK_ERROR.search(messages["test_outside_name"]) and not NETWORK_ERROR.search(
        messages["test_loopback_only"]
    )


def test_the_hosts_files_loopback_names_are_the_sandboxs_own(tmp_path: Path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n127.0.0.1 httpbin.org www.httpbin.org  # stand-in\n10.0.0.2 db\n")
    local = bootstrap._loopback_names(str(hosts))
    assert local == {"localhost", "httpbin.org", "www.httpbin.org"}
    assert not bootstrap._outside("HTTPBIN.org.", local) and not bootstrap._outside("::1", local)
    assert bootstrap._outside("db", local) and bootstrap._outside(b"93.184.216.34", local)
    assert not bootstrap._outside(None, local)
