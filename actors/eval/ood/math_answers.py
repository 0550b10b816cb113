"""`math`: Hendrycks et al.'s MATH, graded two ways as SWE-RL's Table 3 reports it.

`data=PATH` is a `.jsonl` file, a folder of them (every `*.jsonl` in it, sorted), or the
original release's tree of one `.json` file per problem (`algebra/1.json`, ...: every
`**/*.json`, sorted); a folder holding `test/` is read from `test/` only, so the release's
root does not mix in its training half. A row needs `problem` and `solution`; the reference
answer is its `answer` field where the distribution has one (MATH-500), else the last
`\\boxed{...}` of its solution. `level` and `type` (or `subject`) ride along in the data.

    passed            strict: only the answer's last `Answer: ...` line is read (our prompt
                      asks for it; `extracted` is whether there is one)
    also["lenient"]   that line, or else the answer's last `\\boxed{...}`

Two answers are equal when math-verify (the `ood` extra; Hugging Face's parser and sympy
comparison) says so, or when a normalised string comparison (`normalise`, always on) does;
without math-verify the normaliser alone decides, which undercounts equal forms it does not
know (`0.5` against `\\frac{1}{2}`). No model code runs: `run` is not used.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from actors.eval.ood.answer_parts import answer_line, boxed
from actors.eval.ood.suite import SUITES, Problem, RunPrograms, Suite, Verdict, read_jsonl
from conf.errors import UserError

REQUEST = (
    "Solve the math problem below. Think it through step by step, then finish with a line of "
    "its own, `Answer: <final answer>`, giving the final answer alone, simplified (a number or "
    "a LaTeX expression)."
)

# math-verify bounds each parse and each comparison with signal.alarm (whole seconds): sympy
# can take forever on an answer like 10^{10^{10^{10}}}.
VERIFY_LIMIT_S = 3


# -- equivalence ----------------------------------------------------------------------------------


@functools.cache
def _math_verify() -> ModuleType | None:
    """The math-verify package, or None where it is not installed. Imported on first use: it
    pulls in sympy (seconds), which nothing but MATH's grader needs."""
    try:
        import math_verify  # here: optional (the ood extra), and it pulls in sympy
    except ImportError:
        return None
    return math_verify


_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
# A trailing \text{...} after a value is its unit ("5\text{ cm}"); a \text{} alone is the answer.
_UNIT = re.compile(r"(?<=\S)\s*\\(?:text|mbox)\{[^{}]*\}\s*$")
# `\$` and `\%` are dropped whole, as Hendrycks et al.'s normaliser drops them: "\$5" is 5, "25\%" is 25.
_DROPPED = ("\\left", "\\right", "\\!", "\\,", "\\;", "\\$", "$", "\\%")


def normalise(answer: str) -> str:
    """The answer written one way: no spaces, `$`, `\\%`, `\\left`/`\\right`, thin spaces,
    trailing period, unit, `^\\circ` or leading `x=`; `\\text{X}` as X; `\\dfrac`/`\\tfrac` as
    `\\frac`, `\\frac12` as `\\frac{1}{2}`."""
    s = answer.strip().rstrip(".")
    s = _UNIT.sub("", s)
    s = _TEXT.sub(r"\1", s)
    for dropped in _DROPPED:
        s = s.replace(dropped, "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = re.sub(r"\s+", "", s)
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)  # \frac12, a shorthand models write
    return re.sub(r"^[a-zA-Z]=", "", s)


def _as_latex(answer: str) -> str:
    """math-verify's LaTeX extraction reads math inside $...$; an answer already holding $ is left as it is."""
    return answer if "$" in answer else f"${answer}$"


def _verified(gold: str, answer: str) -> bool:
    mv = _math_verify()
    if mv is None:
        return False
    if threading.current_thread() is not threading.main_thread():
        # Without its alarm a hostile answer could hang the grader; fail loudly instead.
        raise RuntimeError("suite=math grades on the main thread: math-verify's time limit is signal.alarm")
    parsed_gold = mv.parse(_as_latex(gold), parsing_timeout=VERIFY_LIMIT_S)
    parsed = mv.parse(_as_latex(answer), parsing_timeout=VERIFY_LIMIT_S)
    return bool(parsed_gold and parsed and mv.verify(parsed_gold, parsed, timeout_seconds=VERIFY_LIMIT_S))


def equal(gold: str, answer: str) -> bool:
    """Whether `answer` is the reference answer `gold` (math-verify's verdict OR the normaliser's)."""
    normal = normalise(answer)
    return (bool(normal) and normal == normalise(gold)) or _verified(gold, answer)


# -- the suite ------------------------------------------------------------------------------------


def _rows(data: str) -> list[tuple[str, dict[str, Any]]]:
    """(pid, row) for every problem under `data`, in sorted file order."""
    if not data:
        raise UserError("data=PATH is required: MATH as .jsonl (a file or a folder), or the release's .json tree")
    path = Path(data)
    if path.is_file():
        return _jsonl_rows(path)
    root = path / "test" if (path / "test").is_dir() else path
    if jsonl := sorted(root.glob("*.jsonl")):
        return [pair for file in jsonl for pair in _jsonl_rows(file)]
    if trees := sorted(root.glob("**/*.json")):
        return [(file.relative_to(root).as_posix(), _json_row(file)) for file in trees]
    raise UserError(f"data={data!r}: no MATH problems there (looked for *.jsonl, then **/*.json, in {root})")


def _jsonl_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    rows = read_jsonl(path, ("problem", "solution"))
    # MATH-500 names its problems (unique_id "test/algebra/1.json"); the release's rows do not.
    return [(str(row["unique_id"]) if "unique_id" in row else f"{path.stem}/{i}", row) for i, row in enumerate(rows)]


def _json_row(path: Path) -> dict[str, Any]:
    try:
        row = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not JSON ({exc})") from exc
    missing = [k for k in ("problem", "solution") if not isinstance(row, dict) or k not in row]
    if missing:
        raise UserError(f"{path}: missing field(s) {', '.join(missing)}")
    return dict(row)


@SUITES.register("math")
class Math(Suite):
    data_format = "MATH (.jsonl, or the release's .json files)"
    metric = "accuracy"

    def load(self, data: str) -> list[Problem]:
        problems = []
        for pid, row in _rows(data):
            gold = str(row["answer"]) if "answer" in row else boxed(str(row["solution"]))
            if not gold:
                raise UserError(f"{data}: problem {pid}: no `answer` field and no \\boxed{{}} in its solution")
            content = f"{REQUEST}\n\n{row['problem']}"
            problems.append(Problem(pid, [{"role": "user", "content": content}], {**row, "gold": gold}))
        return problems

    def grade(self, pairs: list[tuple[Problem, str]], run: RunPrograms) -> list[Verdict]:
        return [self.grade_one(str(problem.data["gold"]), answer) for problem, answer in pairs]

    def grade_one(self, gold: str, answer: str) -> Verdict:
        strict = answer_line(answer)
        lenient = strict if strict is not None else boxed(answer)
        passed = strict is not None and equal(gold, strict)
        lenient_passed = passed if lenient == strict else lenient is not None and equal(gold, lenient)
        detail = (lenient or "no `Answer:` line and no \\boxed{}")[:120]
        return Verdict(passed, strict is not None, detail=detail, also={"lenient": lenient_passed})

    def reference(self, problem: Problem) -> str:
        return f"{problem.data['solution']}\n\nAnswer: {problem.data['gold']}"
