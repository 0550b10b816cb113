"""Model-written programs of the out-of-domain suites, run in the namespace sandbox.

An answer to HumanEval, MBPP or CRUXEval is code a model wrote, so it runs only where the
trainer's candidate patches run (reward/execution/sandbox.py): its own root over an empty
folder, no network, uid nobody, a memory and process cap, CPU and file-size rlimits, a wall
clock. `ProgramRunner.run` runs a list of them `workers` at a time (each is one process in a
namespace of its own: threads here only wait on them).

A program does not grade itself. `calls_program` writes one: it executes the code (in a
module of its own, "solution", as evalplus names it), calls the functions named in a
call list on deep copies of their arguments, and writes what each returned (or the type of
what it raised) to $SWE_RL_REPORT_FD as plain data (values.py); the sandbox's PID 1 relays
those bytes. The suites decode them with `reported` and compare on the host, in the grader's
own process, with expected values that were never in the program: the answer's code can send
back values and nothing else, so it passes only by returning the right ones. No exit status,
output line or token decides anything (an answer that exits early sends no values and fails).
The same builder runs the graders' trusted programs (a reference solution on the same inputs,
CRUXEval's f on an answer's arguments) in sandboxes of their own, which no answer's code
entered. docs/security.md, "Out-of-domain graders", writes the threat model down.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from actors.eval.ood.suite import Program, ProgramResult
from actors.eval.ood.values import Raised, Unplain, decode_results, encode_results
from conf.progress import Progress
from reward.execution import sandbox

# The interpreter that runs the programs: the base Python (the standard library is all HumanEval,
# MBPP and CRUXEval use), mounted read-only at its own path; not the project's venv.
PYTHON = sys._base_executable  # type: ignore[attr-defined]
PREFIX = sys.base_prefix
# values.py's text, which every program starts with (its encoder, and the decoder trusted programs use).
VALUES_SOURCE = Path(__file__).with_name("values.py").read_text(encoding="utf-8")
REPORT_BYTES = 32 << 20  # the values one program may send back (evalplus's plus inputs are many)

# What follows values.py's text in every program: CODE and CALLS are given as string literals,
# so nothing of either is read as part of the harness.
HARNESS = """
def _main(code, calls):
    import copy, os, sys, types
    fd = int(os.environ.pop("SWE_RL_REPORT_FD"))
    calls = decode_results(calls)
    module = sys.modules["solution"] = types.ModuleType("solution")  # a module, as dataclasses expect
    namespace = module.__dict__
    exec(compile(code, "solution.py", "exec"), namespace)
    results = []
    for name, args, kwargs in calls:
        try:
            results.append(namespace[name](*copy.deepcopy(args), **copy.deepcopy(kwargs)))
        except BaseException as exc:
            try:
                message = str(exc)[:300]
            except BaseException:
                message = ""
            results.append(Raised(type(exc).__name__, message))
    report = memoryview(encode_results(results).encode("utf-8", "surrogatepass"))
    while report:
        report = report[os.write(fd, report):]
    os._exit(0)
"""

Call = tuple[str, tuple[Any, ...], dict[str, Any]]  # a function's name, its arguments


def calls_program(code: str, calls: list[Call], wall_s: float) -> Program:
    """A program that executes `code` and reports what each call in `calls` returns."""
    source = VALUES_SOURCE + HARNESS
    return Program(f"{source}\n_main({code!r}, {encode_results(calls)!r})\n", wall_s)


def is_arguments(value: object) -> bool:
    """Decoded arguments of a call: (positional tuple, keyword dict with str keys), exact types."""
    return (
        type(value) is tuple
        and len(value) == 2
        and type(value[0]) is tuple
        and type(value[1]) is dict
        and all(type(k) is str for k in value[1])
    )


def reported(result: ProgramResult, count: int) -> list[Any] | str:
    """The `count` results a program reported (values, Raised, Unplain), or why there are none."""
    if result.report is None:
        return f"its values passed {REPORT_BYTES >> 20} MiB"
    if not result.report:
        return result.detail or "it exited without reporting its values"
    try:
        return decode_results(result.report, count)
    except ValueError as exc:
        return f"a malformed report ({str(exc)[:120]})"


def said(result: Any) -> str:
    """A program's result in a verdict's detail."""
    if isinstance(result, Raised):
        return f"{result.name}: {result.message}" if result.message else result.name
    if isinstance(result, Unplain):
        return f"not plain data: {result.name}"
    return f"{result!r:.80}"


def _limits(wall_s: float) -> sandbox.Limits:
    return sandbox.Limits(
        wall_s=wall_s,
        cpu_s=max(1, int(wall_s)),
        memory_mb=1024,
        pids=32,
        output_bytes=256 << 10,
        report_bytes=REPORT_BYTES,
        file_mb=16,
        open_files=256,
    )


def _why(result: sandbox.SandboxResult) -> str:
    """One line on a run that did not end well: what killed it, or the last line of its traceback."""
    if result.killed:
        return result.killed
    tail = result.stderr.strip().splitlines()
    return tail[-1][:300] if tail else f"exit {result.returncode} without reporting its values"


class ProgramRunner:
    """Runs Programs in the sandbox; `workers` at a time."""

    def __init__(self, workers: int = 2) -> None:
        self.workers = max(1, workers)
        self._empty = Path(tempfile.mkdtemp(prefix="ood-root-"))  # the snapshot: nothing in it
        weakref.finalize(self, shutil.rmtree, self._empty, True)  # gone with the runner

    def run_one(self, program: Program) -> ProgramResult:
        result = sandbox.run(
            [PYTHON, "-I", "main.py"],
            snapshot=self._empty,
            changes={"main.py": program.source},
            ro_paths=(PREFIX,),
            env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
            limits=_limits(program.wall_s),
        )
        clean = result.returncode == 0 and not result.killed
        report = b"" if result.killed else result.report
        return ProgramResult(report, result.killed == "timeout", "" if clean and report else _why(result))

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
