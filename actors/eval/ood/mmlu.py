"""`mmlu`: Hendrycks et al.'s MMLU, 57 subjects of four-option questions, from its published CSVs.

`data=PATH` is the release's folder (its `test/` is read when there is one, else the folder
itself): every `<subject>_test.csv`, sorted by subject, each row without a header
`question, A, B, C, D, answer letter`. A problem's id is `<subject>/<row index>`. Zero-shot,
in our own words: the question, the four options, and a request for a last line
`Answer: <letter>`; the letter is read by answer_parts.choice_letter (a bare letter also counts).
No code runs.
"""

from __future__ import annotations

import csv
from pathlib import Path

from actors.eval.ood.answer_parts import choice_letter
from actors.eval.ood.suite import SUITES, Problem, RunPrograms, Suite, Verdict
from conf.errors import UserError

LETTERS = "ABCD"
SUFFIX = "_test.csv"


def _files(data: str) -> list[Path]:
    if not data:
        raise UserError(f"data=PATH is required: MMLU's folder of <subject>{SUFFIX} files (or the one holding test/)")
    path = Path(data)
    root = path / "test" if (path / "test").is_dir() else path
    files = sorted(root.glob(f"*{SUFFIX}"))
    if not files:
        raise UserError(f"data={data!r}: no MMLU files there (looked for <subject>{SUFFIX} in {root})")
    return files


def _problems(path: Path) -> list[Problem]:
    subject = path.name.removesuffix(SUFFIX)
    problems = []
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        for i, row in enumerate(reader):
            if len(row) != 6 or row[5].strip() not in tuple(LETTERS):
                # line_num is the line the record ends on (a quoted question may span lines).
                raise UserError(f"{path}:{reader.line_num}: want question, A, B, C, D, answer letter; got {row!r:.120}")
            question, *choices, answer = (cell.strip() for cell in row)
            content = _prompt(subject, question, choices)
            data = {"subject": subject, "question": question, "choices": choices, "answer": answer}
            problems.append(Problem(f"{subject}/{i}", [{"role": "user", "content": content}], data))
    return problems


def _prompt(subject: str, question: str, choices: list[str]) -> str:
    options = "\n".join(f"{letter}. {choice}" for letter, choice in zip(LETTERS, choices, strict=True))
    return (
        f"Here is a multiple-choice question on {subject.replace('_', ' ')}. Exactly one option "
        f"is right.\n\n{question}\n\n{options}\n\n"
        "You may reason briefly. End your reply with one line `Answer: <letter>`, the letter "
        "(A, B, C or D) of the right option."
    )


@SUITES.register("mmlu")
class Mmlu(Suite):
    data_format = f"MMLU's <subject>{SUFFIX} files"
    metric = "accuracy"

    def load(self, data: str) -> list[Problem]:
        return [problem for path in _files(data) for problem in _problems(path)]

    def grade(self, pairs: list[tuple[Problem, str]], run: RunPrograms) -> list[Verdict]:
        verdicts = []
        for problem, answer in pairs:
            letter = choice_letter(answer, LETTERS)
            if letter is None:
                verdicts.append(Verdict(False, False, detail="no answer letter"))
            else:
                verdicts.append(Verdict(letter == problem.data["answer"], True, detail=letter))
        return verdicts

    def reference(self, problem: Problem) -> str:
        return f"Answer: {problem.data['answer']}"
