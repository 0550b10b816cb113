"""The agent's episode loop on an in-memory workspace and scripted policies: what each action
does to the files, what the policy is shown, and every way an episode ends (a session limit
the policy's own tree passed among them; the real session's limits: tests/reward/test_workspace.py)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import pytest

from actors.agent.actions import parse_turn
from actors.agent.episode import (
    Message,
    ScriptedPolicy,
    cut_output,
    final_patch,
    run_episode,
    system_prompt,
)
from conf.config import AgentConfig
from data.paths import UnsafePath
from reward.execution.workspace import Changes, CommandResult, SessionFailed, SessionLimit

CFG = AgentConfig()
SUBMIT = "Done.\n```submit\n```"


def edit(path: str, search: str, replace: str) -> str:
    return f"```python\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```"


def bash(command: str) -> str:
    return f"Let me check.\n```bash\n{command}\n```"


class Clock:
    """Time that moves only when a command runs, so a timeout is reached exactly."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeWorkspace:
    """Files in a dict; commands answered from a table; every call recorded."""

    def __init__(self, files: dict[str, str], commands: Mapping[str, CommandResult] = {}, clock: Clock | None = None):
        self.files = dict(files)
        self.commands = commands
        self.clock = clock
        self.runs: list[tuple[str, float, int]] = []
        self.reads: list[str] = []
        self.writes: list[dict[str, str | None]] = []

    def run(self, command: str, timeout_s: float, output_bytes: int) -> CommandResult:
        self.runs.append((command, timeout_s, output_bytes))
        result = self.commands.get(command, CommandResult(127, f"{command}: not found\n", False, False, 0.0))
        if self.clock is not None:
            self.clock.now += result.seconds
        return result

    def read(self, path: str) -> str | None:
        self.reads.append(path)
        return self.files.get(path)

    def write(self, changes: Mapping[str, str | None]) -> None:
        self.writes.append(dict(changes))
        for path, content in changes.items():
            if content is None:
                self.files.pop(path, None)
            else:
                self.files[path] = content


def ok(output: str, seconds: float = 0.1) -> CommandResult:
    return CommandResult(0, output, timed_out=False, truncated=False, seconds=seconds)


def test_an_edit_episode_changes_files_and_submits():
    workspace = FakeWorkspace({"calc.py": "def add(a, b):\n    return a - b\n"})
    turns = [
        bash("cat calc.py"),
        edit("calc.py", "    return a - b", "    return a + b") + "\n" + edit("test_calc.py", "", "assert True"),
        SUBMIT,
    ]
    episode = run_episode(ScriptedPolicy(turns), workspace, "add() subtracts", CFG)
    assert workspace.files == {"calc.py": "def add(a, b):\n    return a + b\n", "test_calc.py": "assert True"}
    assert workspace.writes == [
        {"calc.py": "def add(a, b):\n    return a + b\n", "test_calc.py": "assert True"}
    ]  # one write per turn
    assert (episode.ended_by, episode.commands, episode.format_errors) == ("submit", 1, 0)
    assert [t.kind for t in episode.turns] == ["bash", "edit", "submit"]
    assert [t.exit_code for t in episode.turns] == [127, None, None]
    assert episode.turns[1].observation == "calc.py: 1 edit applied\ntest_calc.py: 1 edit applied (a new file)"
    assert episode.turns[2].observation == ""
    assert [m.role for m in episode.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert episode.messages[1] == Message("user", "add() subtracts")
    assert [m.content for m in episode.messages[2::2]] == turns


def test_the_policy_sees_the_conversation_so_far():
    seen: list[list[Message]] = []

    class Recording(ScriptedPolicy):
        def next_turn(self, messages: list[Message]) -> str:
            seen.append(messages)
            return super().next_turn(messages)

    run_episode(Recording([bash("ls"), SUBMIT]), FakeWorkspace({}, {"ls": ok("a.py\n")}), "task", CFG)
    assert [len(m) for m in seen] == [2, 4]
    assert seen[1][3] == Message("user", "Exit code: 0\nOutput:\na.py\n")


def test_a_failed_search_leaves_its_file_unchanged_and_the_other_paths_applied():
    files = {"a.py": "x = 1\n", "b.py": "y = 1\n"}
    workspace = FakeWorkspace(files)
    turn = (
        edit("a.py", "x = 2", "x = 3") + "\n" + edit("b.py", "y = 1", "y = 2") + "\n" + edit("a.py", "x = 1", "x = 0")
    )
    episode = run_episode(ScriptedPolicy([turn]), workspace, "task", CFG)
    # a.py's edits are all or none: its second edit would apply, its first does not.
    assert workspace.files == {"a.py": "x = 1\n", "b.py": "y = 2\n"}
    assert episode.turns[0].observation == "a.py: not changed: search block 1 not found in a.py\nb.py: 1 edit applied"
    assert (episode.ended_by, episode.format_errors) == ("script_end", 0)


def test_search_equal_to_replace_is_reported():
    workspace = FakeWorkspace({"a.py": "x = 1\n"})
    episode = run_episode(ScriptedPolicy([edit("a.py", "x = 1", "x = 1")]), workspace, "task", CFG)
    assert episode.turns[0].observation == "a.py: not changed: edit 1 of a.py: search equals replace"
    assert workspace.writes == []


def test_an_unsafe_path_is_refused_before_anything_is_read():
    workspace = FakeWorkspace({"a.py": "x = 1\n"})
    turn = (
        edit("../etc/passwd", "", "root::0:0") + "\n" + edit("/abs.py", "", "x") + "\n" + edit("a.py", "x = 1", "x = 2")
    )
    episode = run_episode(ScriptedPolicy([turn]), workspace, "task", CFG)
    assert workspace.reads == ["a.py"]
    assert workspace.writes == [{"a.py": "x = 2\n"}]
    assert episode.turns[0].observation == (
        "../etc/passwd: refused, not a path inside the repository (path component '..')\n"
        "/abs.py: refused, not a path inside the repository (absolute path)\n"
        "a.py: 1 edit applied"
    )


def test_format_errors_in_a_row_end_the_episode():
    cfg = AgentConfig(max_format_errors=3)
    episode = run_episode(
        ScriptedPolicy(["hmm", "```bash\n```", "still thinking", SUBMIT]), FakeWorkspace({}), "t", cfg
    )
    assert (episode.ended_by, episode.format_errors, len(episode.turns)) == ("format_errors", 3, 3)
    assert episode.turns[1].observation == "Your turn was not carried out: the bash block is empty."
    assert episode.messages[-1].role == "user"


def test_a_valid_turn_resets_the_format_error_count():
    cfg = AgentConfig(max_format_errors=2)
    turns = ["hmm", bash("ls"), "hmm", bash("ls"), "hmm", SUBMIT]
    episode = run_episode(ScriptedPolicy(turns), FakeWorkspace({}), "t", cfg)
    assert (episode.ended_by, episode.format_errors, episode.commands) == ("submit", 3, 2)


def test_max_turns_ends_the_episode():
    workspace = FakeWorkspace({}, {"ls": ok("")})
    episode = run_episode(ScriptedPolicy([bash("ls")] * 5), workspace, "t", AgentConfig(max_turns=2))
    assert (episode.ended_by, len(episode.turns), episode.commands) == ("max_turns", 2, 2)
    assert episode.turns[0].observation == "Exit code: 0\n(no output)"
    assert len(workspace.runs) == 2


def test_the_end_of_a_script_ends_the_episode_as_itself():
    episode = run_episode(ScriptedPolicy([bash("ls")]), FakeWorkspace({}), "t", CFG)
    assert (episode.ended_by, len(episode.turns)) == ("script_end", 1)
    assert run_episode(ScriptedPolicy([]), FakeWorkspace({}), "t", CFG).ended_by == "script_end"


def test_the_episode_timeout_is_checked_between_turns():
    clock = Clock()
    workspace = FakeWorkspace({}, {"make": ok("built\n", seconds=400.0)}, clock=clock)
    cfg = AgentConfig(episode_timeout_s=600.0)
    episode = run_episode(ScriptedPolicy([bash("make")] * 5), workspace, "t", cfg, clock=clock)
    # The second command starts at 400 s and ends at 800 s: it is not cut; the third never starts.
    assert (episode.ended_by, len(episode.turns)) == ("timeout", 2)
    assert [t.seconds for t in episode.turns] == [400.0, 400.0]


def test_a_command_gets_the_configured_limits_and_its_timeout_is_said():
    killed = CommandResult(-9, "waiting...\n", timed_out=True, truncated=False, seconds=5.0)
    workspace = FakeWorkspace({}, {"sleep 99": killed})
    cfg = AgentConfig(command_timeout_s=5.0, max_observation_chars=100)
    episode = run_episode(ScriptedPolicy([bash("sleep 99")]), workspace, "t", cfg)
    assert workspace.runs == [("sleep 99", 5.0, 400)]
    assert episode.turns[0].observation == (
        "The command was stopped after 5 seconds (its timeout).\nOutput:\nwaiting...\n"
    )
    assert (episode.commands, episode.command_timeouts, episode.turns[0].exit_code) == (1, 1, -9)


def test_long_output_is_cut_to_its_head_and_tail():
    output = "a" * 100 + "b" * 100
    workspace = FakeWorkspace({}, {"build": CommandResult(2, output, False, False, 1.0)})
    cfg = AgentConfig(max_observation_chars=20)
    episode = run_episode(ScriptedPolicy([bash("build")]), workspace, "t", cfg)
    assert episode.turns[0].observation == (
        "Exit code: 2\nOutput:\n"
        + "a" * 10
        + "\n[output cut: 20 of 200 characters shown, the middle left out]\n"
        + "b" * 10
    )


def test_a_cut_by_the_workspace_makes_the_total_a_lower_bound():
    assert (
        cut_output("abcdef", 4, truncated=True)
        == "ab\n[output cut: 4 of more than 6 characters shown, the middle left out]\nef"
    )
    assert cut_output("abc", 4, truncated=True) == "abc\n[output cut: 3 of more than 3 characters shown]"
    assert cut_output("abcd", 4, truncated=False) == "abcd"
    assert cut_output("abcde", 1, truncated=False) == "a\n[output cut: 1 of 5 characters shown, the middle left out]\n"


def test_the_episode_json_round_trips():
    workspace = FakeWorkspace({"a.py": "x = 1\n"}, {"ls": ok("a.py\n")})
    episode = run_episode(
        ScriptedPolicy([bash("ls"), "hmm", edit("a.py", "x = 1", "x = 2"), SUBMIT]), workspace, "t", CFG
    )
    data = episode.to_json()
    assert json.loads(json.dumps(data)) == data
    assert {k: data[k] for k in ("ended_by", "format_errors", "commands", "command_timeouts")} == {
        "ended_by": "submit",
        "format_errors": 1,
        "commands": 1,
        "command_timeouts": 0,
    }
    assert data["messages"][0]["role"] == "system" and data["messages"][1] == {"role": "user", "content": "t"}
    assert [t["kind"] for t in data["turns"]] == ["bash", "invalid", "edit", "submit"]
    assert data["turns"][0]["exit_code"] == 0 and data["turns"][2]["observation"] == "a.py: 1 edit applied"


def test_the_system_prompt_states_the_limits_and_its_examples_parse():
    prompt = system_prompt(
        AgentConfig(max_turns=7, max_format_errors=2, command_timeout_s=30.0, max_observation_chars=500)
    )
    words = " ".join(prompt.split())
    assert "at most 7 turns" in words and "after 2 such turns in a row" in words
    assert "stopped after 30 seconds" in words and "longer than 500 characters" in words
    example_edit = prompt[
        prompt.index("```python") : prompt.index(">>>>>>> REPLACE\n```") + len(">>>>>>> REPLACE\n```")
    ]
    assert parse_turn(example_edit).kind == "edit"
    assert parse_turn(prompt[prompt.index("```submit") :].split("\n```", 1)[0] + "\n```").kind == "submit"
    assert parse_turn(prompt[prompt.index("```bash") : prompt.index("```python")]).command == "the command"
    # The whole prompt shows all three actions: as a turn it would be refused.
    assert parse_turn(prompt).error.startswith("a bash block and edit blocks")


class ThinkingPolicy(ScriptedPolicy):
    """A scripted policy whose every answer takes `think_s` on the test's clock."""

    def __init__(self, turns: list[str], clock: Clock, think_s: float) -> None:
        super().__init__(turns)
        self.clock, self.think_s = clock, think_s

    def next_turn(self, messages):
        self.clock.now += self.think_s
        return super().next_turn(messages)


def test_a_turn_tells_its_action_time_from_the_wait_for_its_answer():
    from actors.driver.agent_metrics import agent_metrics
    from actors.driver.generation import Group
    from actors.rollout.actor import Completion

    clock = Clock()
    workspace = FakeWorkspace({"a.py": "x = 1\n"}, {"make": ok("built\n", seconds=30.0)}, clock=clock)
    turns = [bash("make"), edit("a.py", "x = 1", "x = 2"), SUBMIT]
    episode = run_episode(ThinkingPolicy(turns, clock, 2.0), workspace, "t", CFG, clock=clock)
    assert [(t.kind, t.seconds, t.action_s) for t in episode.turns] == [
        ("bash", 32.0, 30.0),
        ("edit", 2.0, 0.0),  # the fake's reads and writes take no time on this clock
        ("submit", 2.0, 0.0),
    ]
    record = episode.to_json()
    completions = [Completion([1], [0.0], "", "submit", [1.0], record) for _ in range(2)]
    metrics = agent_metrics([Group("1/x", None, completions, 0, "a")])  # type: ignore[arg-type]
    assert metrics["agent_generation_s"] == 6.0 and metrics["agent_command_s"] == 30.0  # per episode


class LimitedWorkspace(FakeWorkspace):
    """A workspace whose file `big.py` is over its read budget and whose `link/` goes through a
    link of the tree, as a real session answers them (reward/execution/workspace.py)."""

    def read(self, path: str) -> str | None:
        if path == "big.py":
            raise SessionLimit("limit_answer", "session read: a file too big to read")
        if path.startswith("link/"):
            raise UnsafePath(f"unsafe path {path!r}: 'link' is not a directory of the tree")
        return super().read(path)


def test_a_session_limit_ends_the_episode_as_that_limit():
    workspace = LimitedWorkspace({"a.py": "x = 1\n"})
    turns = [edit("a.py", "x = 1", "x = 2"), edit("big.py", "x = 1", "x = 2"), SUBMIT]
    episode = run_episode(ScriptedPolicy(turns), workspace, "t", CFG)
    assert (episode.ended_by, len(episode.turns), episode.limit) == (
        "limit_answer",
        2,
        "session read: a file too big to read",
    )
    assert episode.turns[1].observation == episode.limit and episode.to_json()["limit"] == episode.limit


def test_a_path_through_a_link_of_the_tree_is_refused_and_the_episode_goes_on():
    workspace = LimitedWorkspace({"a.py": "x = 1\n"})
    turn = edit("link/passwd", "root", "x") + "\n" + edit("a.py", "x = 1", "x = 2")
    episode = run_episode(ScriptedPolicy([turn, SUBMIT]), workspace, "t", CFG)
    assert episode.ended_by == "submit" and workspace.files == {"a.py": "x = 2\n"}
    assert episode.turns[0].observation.splitlines() == [
        "link/passwd: refused, unsafe path 'link/passwd': 'link' is not a directory of the tree",
        "a.py: 1 edit applied",
    ]


class PatchingWorkspace(FakeWorkspace):
    def __init__(self, fail: Exception | None) -> None:
        super().__init__({})
        self.fail = fail

    def patch(self) -> tuple[str, Changes]:
        if self.fail is not None:
            raise self.fail
        return "a patch", Changes({"a.py": "x"}, {"b.bin": "a binary file"})


def test_the_final_patch_of_a_tree_past_a_limit_is_none_and_the_episode_ends_as_that_limit():
    done = run_episode(ScriptedPolicy([SUBMIT]), FakeWorkspace({}), "t", CFG)
    kept = final_patch(done, PatchingWorkspace(None))  # type: ignore[arg-type]
    assert kept == (done, "a patch", {"b.bin": "a binary file"})
    hit = SessionLimit("limit_depth", "session changes: folders nested over 128 deep in the tree")
    episode, patch, left_out = final_patch(done, PatchingWorkspace(hit))  # type: ignore[arg-type]
    assert (episode.ended_by, episode.limit, patch, left_out) == ("limit_depth", str(hit), "", {})
    # One a limit already ended has no patch, and the session is not asked for one.
    ended = dataclasses.replace(done, ended_by="limit_disk")
    assert final_patch(ended, PatchingWorkspace(AssertionError("asked"))) == (ended, "", {})  # type: ignore[arg-type]
    # A session that fails is not the policy's: it goes up to the caller (the infra ending).
    with pytest.raises(SessionFailed):
        final_patch(done, PatchingWorkspace(SessionFailed("the session's sandbox ended")))  # type: ignore[arg-type]
