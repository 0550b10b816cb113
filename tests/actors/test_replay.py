"""Replay (actors/replay.py): scripted agent episodes on a demo instance, through the real
sandbox session, action parser, final patch and rewards that training uses."""

from __future__ import annotations

import json
import socket

import pytest

from actors.replay import find_instance, main, replay
from conf.config import AgentConfig, ExecutionConfig
from reward.execution import sandbox
from reward.execution.runner import Runner

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")

INSTANCE = "demo__calspan-3"
CHECK = "python -c 'from datetime import date; from calspan.months import add_months; print(add_months(date(2023, 1, 31), 1))'"
FIX = """February has no 31st: clamp the day to the month's last.
```python
### calspan/months.py
<<<<<<< SEARCH
    return day.replace(year=year, month=month0 + 1)
=======
    # Jan 31 + 1 month: February has no 31st, so use its last day (as billing systems do).
    return date(year, month0 + 1, min(day.day, days_in_month(year, month0 + 1)))
>>>>>>> REPLACE
```"""
BREAK = """```python
### calspan/months.py
<<<<<<< SEARCH
    year, month0 = divmod(index, 12)
=======
    year, month0 = divmod(index, 13)
>>>>>>> REPLACE
```"""
SUBMIT = "Done.\n```submit\n```"


def bash(command: str) -> str:
    return f"Next:\n```bash\n{command}\n```"


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return Runner(ExecutionConfig(cache_dir=str(tmp_path_factory.mktemp("execution")), wall_s=120))


@pytest.fixture(scope="module")
def instance():
    return find_instance("demo", INSTANCE)


def test_a_scripted_fix_in_several_turns_earns_every_reward(runner, instance):
    turns = [bash("cat calspan/months.py"), bash(CHECK), FIX, bash(CHECK), SUBMIT]
    result = replay(instance, turns, ["similarity", "tests", "hybrid"], runner, AgentConfig())
    assert [t["kind"] for t in result["turns"]] == ["bash", "bash", "edit", "bash", "submit"]
    assert "ValueError" in result["turns"][1]["observation"]  # the bug, reproduced
    assert "2023-02-28" in result["turns"][3]["observation"]  # and gone after the edit
    assert result["ended_by"] == "submit" and result["resolved"] is True
    assert result["rewards"] == {"similarity": 1.0, "tests": 1.0, "hybrid": 1.0}  # the exact fix
    assert result["patch"] == instance.patch


def test_an_episode_that_breaks_the_code_earns_nothing_from_the_tests(runner, instance):
    result = replay(instance, [BREAK, bash(CHECK), SUBMIT], ["similarity", "tests"], runner, AgentConfig())
    assert result["rewards"]["tests"] == 0.0 and result["resolved"] is False
    assert 0.0 <= result["rewards"]["similarity"] < 1.0  # a diff like the fix, but not the fix


def test_escapes_are_contained_scored_and_the_next_episode_works(runner, instance, tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.1)
    port = server.getsockname()[1]
    attacks = [
        f"echo planted > {tmp_path}/planted; echo planted > /root/planted; echo status=$?",
        f"echo hi > /dev/tcp/127.0.0.1/{port} && echo connected",
        "ls /tmp/ray; cat /tmp/ray/session_latest/*token* 2>&1 | head -c 200",
        ":(){ :|:& };:",
        "head -c 400M /dev/zero > big; echo status=$?",
    ]
    result = replay(instance, [*map(bash, attacks), SUBMIT], ["tests"], runner, AgentConfig())
    with pytest.raises(TimeoutError):
        server.accept()  # nothing reached the host's port
    server.close()
    observations = [t["observation"] for t in result["turns"][:-1]]
    assert "status=0" not in observations[0] and not list(tmp_path.iterdir())
    assert "connected" not in observations[1] and "token" not in observations[2].replace("*token*", "")
    assert "status=0" not in observations[4]  # the file limit
    assert result["rewards"] == {"tests": 0.0} and result["patch"] == ""  # `big` never made it
    again = replay(instance, [FIX, SUBMIT], ["tests"], runner, AgentConfig())
    assert again["rewards"] == {"tests": 1.0}


def test_the_cli_writes_the_episode_as_one_object(tmp_path, runner):
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps([bash("ls"), "no action here", FIX, SUBMIT]))
    out = tmp_path / "out.json"
    args = ["--data", "demo", "--instance", INSTANCE, "--turns", str(turns), "--json", str(out)]
    assert main([*args, f"reward.execution.cache_dir={runner.cfg.cache_dir}"]) == 0
    result = json.loads(out.read_text())
    assert [t["kind"] for t in result["turns"]] == ["bash", "invalid", "edit", "submit"]
    assert result["format_errors"] == 1 and result["rewards"] == {"similarity": 1.0} and result["resolved"] is None
    with pytest.raises(SystemExit) as bad:
        main([*args[:2], "--instance", "nope", *args[4:]])
    assert bad.value.code == 2
