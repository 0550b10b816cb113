"""One episode of the agent mode: ask the policy, parse its turn, act on a workspace, observe.

The loop is pure over two protocols, so it runs without a sandbox or an engine: a `Workspace`
(a sandboxed copy of the repository: reward/execution/workspace.py's Session) runs
commands and reads and writes files, and a `Policy` writes the next assistant turn given the
conversation. Code the model writes runs only through `Workspace.run`; here every path of an
edit is checked (data.paths.path_problem) before a byte is read or written.

Each turn: the policy's text -> `parse_turn` -> one action, and its observation appended as a
user message:
- bash: run with cfg.command_timeout_s; the observation gives the exit code (or says the
  command was killed at its timeout) and the output, cut to cfg.max_observation_chars by
  keeping its head and tail, the cut said in the text;
- edit: per path in order: an unsafe path is refused (and so is one through a link of the
  tree, which the workspace refuses); else its content now (absent = a new, empty file) gets
  its edits by the reward's rule 3 (`apply_path_edits`), all or none for the path; the paths
  that applied are written together. Paths are independent: one failed search leaves its own
  path unchanged and the others applied, and the observation says which;
- submit: the episode ends, with no observation;
- invalid: the observation says what was wrong and how to act.

The episode ends (`ended_by`) at a submit ("submit"); after cfg.max_format_errors invalid
turns in a row ("format_errors"); when cfg.max_turns turns are taken ("max_turns"); when
cfg.episode_timeout_s of wall time has passed, checked between turns so a running command is
never cut by it ("timeout"); or when the policy has no next turn ("script_end": a
ScriptedPolicy past its last turn raises NoMoreTurns; "max_tokens": an engine policy whose
context reached cfg.max_tokens, actors/agent/rollout.py); or when an action passed one of the
session's budgets (SessionLimit: a file too big to read, no room left for a write; one of
reward/execution/workspace.py's LIMITS, "limit_answer", "limit_disk", ...). The loop counts no
tokens.

Whose failure: what the policy did in its own session is the policy's, so an episode a session
limit ended, or whose final patch would pass one (too many files, names too long, folders too
deep: `final_patch`), ends as that limit and is scored with no patch (0 under every kind: an
empty patch resolves nothing and is like no oracle), in the loss and its group's statistics.
Only a session that fails (SessionFailed: it did not start, its sandbox died) is an
infrastructure failure, which the driver leaves out.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from actors.agent.actions import Action, ActionKind, parse_turn
from conf.config import AgentConfig
from data.paths import UnsafePath, path_problem
from data.schema import Instance
from reward.apply import MAX_CONTENT_CHARS, apply_path_edits
from reward.execution.workspace import LIMITS, CommandResult, Limit, Session, SessionLimit
from reward.parse import Rejected, quote

EndedBy = Literal["submit", "format_errors", "max_turns", "timeout", "script_end", "max_tokens", Limit]


class Workspace(Protocol):
    """A copy of the repository the policy acts in; the sandbox keeps it from everything else."""

    def run(self, command: str, timeout_s: float, output_bytes: int) -> CommandResult:
        """Run `command` with a shell in the repository's root, killed after `timeout_s`; keep
        the first `output_bytes` of its output."""
        ...

    def read(self, path: str) -> str | None:
        """The file's content in the workspace now; None when there is no such file."""
        ...

    def write(self, changes: Mapping[str, str | None]) -> None:
        """Replace each path's content (None: delete the file)."""
        ...


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


class NoMoreTurns(Exception):
    """Raised by a policy that has no next turn: the episode ends with `ended_by`, "script_end"
    for a script that ran out, "max_tokens" for an engine policy whose context is full."""

    def __init__(self, ended_by: EndedBy = "script_end") -> None:
        super().__init__(ended_by)
        self.ended_by: EndedBy = ended_by


class Policy(Protocol):
    def next_turn(self, messages: list[Message]) -> str:
        """The assistant's text for the next turn given the conversation so far (NoMoreTurns
        when there is none)."""
        ...


class ScriptedPolicy:
    """A policy that says the given turns in order, whatever it is shown; then NoMoreTurns.
    Running out ends the episode as itself ("script_end"), not as a made-up submit, so a
    replayed or test script that stops early is told apart from one that submits."""

    def __init__(self, turns: list[str]):
        self._turns = list(turns)
        self._next = 0

    def next_turn(self, messages: list[Message]) -> str:
        if self._next >= len(self._turns):
            raise NoMoreTurns
        self._next += 1
        return self._turns[self._next - 1]


@dataclass(frozen=True)
class Turn:
    text: str
    kind: ActionKind
    # The user message that answered the turn ("" after a submit).
    observation: str
    # Wall time of the turn: the policy's answer and the action.
    seconds: float
    # The command's exit code (bash turns only).
    exit_code: int | None = None
    # Of `seconds`, the action's: the command's run, or reading and writing the edited files;
    # the rest is the wait for the policy's answer (an engine's generation and queueing).
    action_s: float = 0.0


@dataclass(frozen=True)
class Episode:
    messages: tuple[Message, ...]
    turns: tuple[Turn, ...]
    ended_by: EndedBy
    # Invalid turns in the whole episode (the limit counts them in a row).
    format_errors: int
    # Commands run, and how many of them were killed at their timeout.
    commands: int
    command_timeouts: int
    # What the session limit that ended it said ("" for every other ending).
    limit: str = ""

    def to_json(self) -> dict[str, Any]:
        """The episode as plain JSON types (dicts, lists, strings, numbers, None)."""
        out = dataclasses.asdict(self)
        out["messages"], out["turns"] = list(out["messages"]), list(out["turns"])
        return out


def time_split(turns: list[dict[str, Any]]) -> tuple[float, float]:
    """(generation, commands): an episode's seconds waiting for its turns to be answered, and
    its commands' seconds, from its record's turns (Episode.to_json)."""
    generation = sum(float(t["seconds"]) - float(t.get("action_s", 0.0)) for t in turns)
    commands = sum(float(t.get("action_s", 0.0)) for t in turns if t["kind"] == "bash")
    return generation, commands


def system_prompt(cfg: AgentConfig) -> str:
    """The instructions the policy sees first: the three actions and the limits it acts under."""
    return f"""You are fixing an issue in a software repository. You work in a copy of it, one
action per turn, and each action's result comes back to you as the next message.

End every turn with exactly one of these actions (reason in plain text before it):

1. Run one shell command in the repository's root directory:
```bash
the command
```
You see its exit code and output. A command is stopped after {cfg.command_timeout_s:g} seconds,
and output longer than {cfg.max_observation_chars} characters is shortened to its beginning and
end.

2. Edit files with one or more SEARCH/REPLACE blocks:
```python
### path/to/file.py
<<<<<<< SEARCH
the exact lines to replace, copied from the file
=======
the lines to put in their place
>>>>>>> REPLACE
```
The search lines must match the file as it is now, from the start of a line, indentation
included; every place they match is replaced. An empty search on a file that does not exist
creates it. Paths are relative to the repository root.

3. Submit when the issue is fixed, with an empty block:
```submit
```
Your changes to the repository are then final.

A turn with no action, or with more than one, is not carried out; after
{cfg.max_format_errors} such turns in a row the work stops. You have at most {cfg.max_turns}
turns."""


def task_messages(cfg: AgentConfig, instance: Instance, seed: int = 0) -> list[dict[str, str]]:
    """An episode's prompt as chat messages: the system prompt and the issue. The training
    loader's prompt builder in rollout.mode=agent (data/loader.py `messages`: the seed orders
    the paper's files, and an episode's prompt has none), evaluation's and the engine's."""
    return [{"role": "system", "content": system_prompt(cfg)}, {"role": "user", "content": instance.problem_statement}]


def run_episode(
    policy: Policy,
    workspace: Workspace,
    task: str,
    cfg: AgentConfig,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Episode:
    """Run turns until the episode ends (module docstring); `clock` is injectable for tests."""
    messages = [Message("system", system_prompt(cfg)), Message("user", task)]
    turns: list[Turn] = []
    errors_in_a_row = format_errors = commands = command_timeouts = 0
    started = clock()
    ended_by: EndedBy = "max_turns"
    limit = ""
    while len(turns) < cfg.max_turns:
        if clock() - started >= cfg.episode_timeout_s:
            ended_by = "timeout"
            break
        turn_started = clock()
        try:
            text = policy.next_turn(list(messages))
        except NoMoreTurns as stop:
            ended_by = stop.ended_by
            break
        messages.append(Message("assistant", text))
        action = parse_turn(text)
        if action.kind == "submit":
            turns.append(Turn(text, "submit", "", clock() - turn_started))
            ended_by = "submit"
            break
        exit_code, action_started = None, clock()
        try:
            if action.kind == "bash":
                result = workspace.run(action.command, cfg.command_timeout_s, _output_bytes(cfg))
                observation, exit_code = bash_observation(result, cfg), result.exit_code
                commands += 1
                command_timeouts += result.timed_out
            elif action.kind == "edit":
                observation = apply_turn_edits(workspace, action)
            else:
                observation = f"Your turn was not carried out: {action.error}."
        except SessionLimit as hit:  # the policy's own doing: the episode ends as that limit
            turns.append(Turn(text, action.kind, str(hit), clock() - turn_started, None, clock() - action_started))
            ended_by, limit = hit.limit, str(hit)
            break
        messages.append(Message("user", observation))
        now = clock()
        turns.append(Turn(text, action.kind, observation, now - turn_started, exit_code, now - action_started))
        errors_in_a_row = errors_in_a_row + 1 if action.kind == "invalid" else 0
        format_errors += action.kind == "invalid"
        if errors_in_a_row >= cfg.max_format_errors:
            ended_by = "format_errors"
            break
    return Episode(tuple(messages), tuple(turns), ended_by, format_errors, commands, command_timeouts, limit)


def final_patch(episode: Episode, session: Session) -> tuple[Episode, str, dict[str, str]]:
    """The episode, its final patch and what the patch left out (Session.patch). An episode a
    session limit ended has none, and neither has one whose patch would pass a limit: it then
    ends as that limit (module docstring)."""
    if episode.ended_by in LIMITS:
        return episode, "", {}
    try:
        patch, changes = session.patch()
    except SessionLimit as hit:
        return dataclasses.replace(episode, ended_by=hit.limit, limit=str(hit)), "", {}
    return episode, patch, changes.left_out


def _output_bytes(cfg: AgentConfig) -> int:
    # UTF-8 spends at most 4 bytes a character, so output kept to this many bytes still holds
    # the max_observation_chars characters shown, and a bit of tail beyond them.
    return 4 * cfg.max_observation_chars


def bash_observation(result: CommandResult, cfg: AgentConfig) -> str:
    """The exit code (or the timeout) and the output, cut to cfg.max_observation_chars."""
    if result.timed_out:
        head = f"The command was stopped after {cfg.command_timeout_s:g} seconds (its timeout)."
    else:
        head = f"Exit code: {result.exit_code}"
    if not result.output:
        return f"{head}\n(no output)"
    return f"{head}\nOutput:\n{cut_output(result.output, cfg.max_observation_chars, result.truncated)}"


def cut_output(output: str, max_chars: int, truncated: bool) -> str:
    """`output` whole when it fits, else its head and tail with the cut said between them.

    Head and tail, not head alone: a command's first lines say what it started, and its last
    ones hold the traceback or the test summary that says how it ended. A workspace that kept
    only the output's head (`truncated`) makes the total a lower bound, and says so."""
    total = f"more than {len(output)}" if truncated else str(len(output))
    if len(output) <= max_chars:
        return output if not truncated else f"{output}\n[output cut: {len(output)} of {total} characters shown]"
    head = output[: (max_chars + 1) // 2]
    tail = output[len(output) - max_chars // 2 :]
    return f"{head}\n[output cut: {max_chars} of {total} characters shown, the middle left out]\n{tail}"


def apply_turn_edits(workspace: Workspace, action: Action) -> str:
    """Apply an edit action path by path (module docstring); the observation says what happened."""
    changes: dict[str, str | None] = {}
    lines = []
    for path, edits in action.edits.items():
        shown = quote(path)
        if (problem := path_problem(path)) is not None:
            lines.append(f"{shown}: refused, not a path inside the repository ({problem})")
            continue
        try:
            original = workspace.read(path)
        except UnsafePath as refused:  # a link of the tree on the way
            lines.append(f"{shown}: refused, {refused}")
            continue
        try:
            content = apply_path_edits(path, original or "", edits, MAX_CONTENT_CHARS)
        except Rejected as rejected:
            lines.append(f"{shown}: not changed: {rejected.reason}")
            continue
        if content is None:
            lines.append(f"{shown}: not changed: the result would exceed {MAX_CONTENT_CHARS} characters")
            continue
        changes[path] = content
        created = " (a new file)" if original is None else ""
        lines.append(f"{shown}: {len(edits)} edit{'s' if len(edits) > 1 else ''} applied{created}")
    if changes:
        try:
            workspace.write(changes)
        except UnsafePath as refused:  # each path was read through no link, so rarely: said, and the episode goes on
            lines.append(f"not written: {refused}")
    return "\n".join(lines)
