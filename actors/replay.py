"""`python -m actors.replay`: run a list of assistant turns as one agent episode, as training
would: the same sandbox session, action parser, final patch and rewards.

    python -m actors.replay --data DATA --instance ID --turns TURNS.json
        [--reward similarity,tests] [--json OUT.json] [--max-turns N]
        [reward.execution.repos=[owner/name=CLONE,...]] [reward.execution.cache_dir=DIR]
        [reward.execution.*=...]

DATA: a Parquet file or directory of instances, or `demo` / `demo-js`. TURNS.json: a JSON list of strings,
the assistant's turns in order (each free text ending in one action: agent/actions.py), or one
line of an agent step's rollout log (`run_dir/rollouts/step_N.jsonl`), whose turns it replays. The
episode runs in a sandbox session over the instance's snapshot in its environment
(Runner.session: what its test runs see; the sandbox's settings are training's
`reward.execution.*` keys as `key=value`, conf/overrides.py, and `--git`, `--cache-dir` are
refused with their new names); each observation is printed as it comes. At the end
the patch is the diff of the session's tree against the snapshot (reward/execution/workspace.py:
links, binaries and bytecode left out and named; none when a session limit ended the episode,
whose `ended_by` names it), and each requested reward kind scores it
(reward/kinds/outcomes.py score_patch): `similarity` against the oracle patch, needing no tests;
`tests` and `hybrid` from one fresh test run of that patch alone (its test patch applied, in a
new sandbox: nothing the episode left behind reaches the verdict).

`--json OUT` writes one object: `instance_id`, `turns` (each: text, kind, observation, seconds,
exit_code), `ended_by`, `format_errors`, `commands`, `command_timeouts`, `patch`, `left_out`,
`rewards` ({kind: reward}), `errors` ({kind: why} where a kind scored with a reason), `resolved`
(None without a test run), `test_status`, `session_start_s`. It is how a user debugs an
environment, and how the tests drive a scripted policy.

Exit status: 0 when the episode ran (whatever its reward), 2 on a user error (a missing file,
an unknown instance or kind: one line naming it), 3 when the session could not start
(SessionFailed: the environment, the snapshot or the sandbox; an infrastructure failure, said
as such).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from actors.agent.episode import ScriptedPolicy, final_patch, run_episode
from conf import overrides
from conf.config import AgentConfig
from conf.errors import UserError, fail
from conf.io import write_text
from data.loader import read_instances
from data.schema import Instance
from reward.execution.runner import Runner, TestJob
from reward.execution.workspace import SessionFailed
from reward.kinds.outcomes import score_patch

KINDS = ("similarity", "tests", "hybrid")


def read_turns(path: str) -> list[str]:
    try:
        turns = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"--turns {path}: {exc}") from None
    if isinstance(turns, dict) and isinstance(turns.get("episode"), dict):  # a line of a step's rollout log
        turns = [t.get("text") for t in turns["episode"].get("turns", [])]
    if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
        raise UserError(
            f"--turns {path}: expected a JSON list of strings (the assistant's turns) or a rollout log line"
        )
    return turns


def find_instance(data: str, instance_id: str) -> Instance:
    seen = 0
    for instance in read_instances(data, 0):
        seen += 1
        if instance.instance_id == instance_id:
            return instance
    raise UserError(f"--instance {instance_id}: not among the {seen} instances of {data}")


def replay(
    instance: Instance, turns: list[str], kinds: list[str], runner: Runner, agent: AgentConfig
) -> dict[str, Any]:
    """The episode, its patch and its rewards, as one JSON-able object (module docstring)."""
    with runner.session(instance) as session:
        episode = run_episode(ScriptedPolicy(turns), session, instance.problem_statement, agent)
        episode, patch, left_out = final_patch(episode, session)
        start_s = session.start_s
    run = runner.run(TestJob(instance, patch)) if {"tests", "hybrid"} & set(kinds) else None
    rewards, errors = {}, {}
    for kind in kinds:
        result = score_patch(kind, instance, patch, run)
        rewards[kind] = result.reward
        if result.error:
            errors[kind] = result.error
    out = episode.to_json()
    out.pop("messages")  # the turns and observations are the conversation; the prompt is the code's
    return {
        "instance_id": instance.instance_id,
        **out,
        "patch": patch,
        "left_out": left_out,
        "rewards": rewards,
        "errors": errors,
        "resolved": None if run is None else run.resolved,
        "test_status": None if run is None else run.status,
        "session_start_s": round(start_s, 3),
    }


def _print(result: dict[str, Any]) -> None:
    for number, turn in enumerate(result["turns"], start=1):
        print(f"--- turn {number}: {turn['kind']} ({turn['seconds']:.2f} s)")
        if turn["observation"]:
            print(turn["observation"])
    print(f"--- ended by {result['ended_by']}; patch ({len(result['patch'])} characters):")
    print(result["patch"] or "(empty)")
    for path, why in result["left_out"].items():
        print(f"left out of the patch: {path}: {why}")
    for kind, reward in result["rewards"].items():
        why = result["errors"].get(kind)
        print(f"reward {kind}: {reward:g}" + (f" ({why})" if why else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="Parquet file or directory of instances, or 'demo' / 'demo-js'")
    parser.add_argument("--instance", required=True, help="the instance_id to replay on")
    parser.add_argument("--turns", required=True, help="JSON list of the assistant's turns")
    parser.add_argument("--reward", default="similarity", help=f"comma-separated kinds of {KINDS}")
    parser.add_argument("--json", default=None, help="write the whole result here as one JSON object")
    parser.add_argument("--max-turns", type=int, default=AgentConfig.max_turns, help="agent.max_turns")
    parser.epilog = "and key=value overrides of reward.execution.*, as in training (conf/overrides.py)"
    try:
        rest, execution, address = overrides.pool_config(sys.argv[1:] if argv is None else argv, "actors.replay")
        if address:
            raise UserError(f"ray.address={address!r}: actors.replay runs its session in this process, without Ray")
    except UserError as exc:
        fail("actors.replay", str(exc))
    args = parser.parse_args(rest)
    try:
        kinds = [k.strip() for k in args.reward.split(",") if k.strip()]
        unknown = [k for k in kinds if k not in KINDS]
        if not kinds or unknown:
            raise UserError(f"--reward {args.reward}: {unknown or 'no kind'}; kinds are {', '.join(KINDS)}")
        turns = read_turns(args.turns)
        instance = find_instance(args.data, args.instance)
        agent = AgentConfig(max_turns=args.max_turns)
        runner = Runner(execution)
        try:
            result = replay(instance, turns, kinds, runner, agent)
        except SessionFailed as exc:
            print(f"actors.replay: the session could not run (an infrastructure failure): {exc}", file=sys.stderr)
            return 3
    except UserError as exc:
        fail("actors.replay", str(exc))
    _print(result)
    if args.json:
        write_text(Path(args.json), json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
