"""Sandbox sessions (reward/execution/workspace.py): start latency and per-command overhead.

    python bench/workspace.py [--commands 200] [--starts 20] [--python 3.11]

In one process, against baselines of the same run (these machines are noisy):

  (1) session start: Session(...) until PID 1 answers, median of --starts, on a spare PID 1
      (workspace.py SPARES, as sessions start) and cold (no spares: unshare and the interpreter
      started by the session), and its close; beside a one-shot `sandbox.run(["true"])` (what a
      test run pays) and bare `subprocess.run(["true"])`; with the host's interpreter and, with
      --python, a uv-built environment (warm: built once before the timing). Sessions start
      0.1 s apart (an episode lasts seconds: the spare taken is replaced meanwhile);
  (2) per command: `true`, `cat FILE` and `python -c pass` through a live session's `run()`,
      against the same command bare (`subprocess.run(["bash", "-c", ...])` in the snapshot, with
      the session's variables, PYTHONPATH the snapshot): the medians, their
      difference in ms (goal: at most 10 ms more than bare) and ratio.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reward.execution import identity, sandbox, workspace  # noqa: E402
from reward.execution.environments import Environment, Environments, EnvSpec  # noqa: E402
from reward.execution.workspace import Session  # noqa: E402


def median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 2)


def _snapshot(root: Path) -> Path:
    snapshot = root / "snapshot"
    (snapshot / "pkg").mkdir(parents=True)
    (snapshot / "pkg" / "mod.py").write_text("def f():\n    return 1\n" * 50)
    for path in [snapshot, *snapshot.rglob("*")]:
        identity.give(path)
    return snapshot


def _starts(snapshot: Path, env: Environment, n: int) -> dict[str, float]:
    def starts(keep: int) -> tuple[float, float]:
        workspace.SPARES.resize(keep)
        opened, closed = [], []
        for _ in range(n):
            time.sleep(0.1)
            begin = time.perf_counter()
            session = Session(snapshot, env)
            opened.append(time.perf_counter() - begin)
            begin = time.perf_counter()
            session.close()
            closed.append(time.perf_counter() - begin)
        return round(statistics.median(opened) * 1000, 2), round(statistics.median(closed) * 1000, 2)

    keep = workspace.SPARES.keep  # the process's own setting, put back after the cold starts
    cold, cold_close = starts(0)
    warm, warm_close = starts(keep)
    one_shot = median_ms(lambda: sandbox.run(["true"], snapshot=snapshot, ro_paths=env.ro_paths, env=env.variables), n)
    return {
        "session_start_ms": warm,
        "session_start_cold_ms": cold,
        "session_close_ms": warm_close,
        "session_close_cold_ms": cold_close,
        "sandbox_run_true_ms": one_shot,
    }


def _commands(snapshot: Path, env: Environment, n: int) -> dict[str, dict[str, float]]:
    commands = {"true": "true", "cat": "cat pkg/mod.py", "python": f"{env.python} -c pass"}
    out = {}
    # Bare with the session's variables, its import path the snapshot itself: a tree on the
    # path costs every import a lookup there, in the session or not.
    variables = {**env.variables, "PYTHONPATH": str(snapshot)}
    with Session(snapshot, env) as session:
        for name, command in commands.items():
            in_session = median_ms(functools.partial(session.run, command, 30, 1 << 16), n)
            bare_run = functools.partial(subprocess.run, ["bash", "-c", command], cwd=snapshot, env=variables)
            bare = median_ms(functools.partial(bare_run, capture_output=True), n)
            out[name] = {
                "session_ms": in_session,
                "bare_ms": bare,
                "extra_ms": round(in_session - bare, 2),
                "ratio": round(in_session / bare, 2),
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--python", default=None, help="also with a uv-built environment of this Python")
    args = parser.parse_args(argv)
    if (why := sandbox.available()) is not None:
        raise SystemExit(f"bench/workspace.py: {why}")
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = _snapshot(Path(tmp))
        envs = {"host": Environments(Path(tmp) / "envs").ensure(EnvSpec())}
        if args.python:
            spec = EnvSpec(python=args.python, requirements=("pytest",))
            envs[args.python] = Environments(ROOT / ".cache" / "execution" / "envs").ensure(spec)  # warm
        result: dict[str, object] = {
            "bare_true_ms": median_ms(lambda: subprocess.run(["true"]), args.starts),
        }
        for name, env in envs.items():
            result[f"start[{name}]"] = _starts(snapshot, env, args.starts)
            result[f"commands[{name}]"] = _commands(snapshot, env, args.commands)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
