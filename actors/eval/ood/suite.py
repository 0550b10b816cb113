"""What an out-of-domain suite is: its loader, its prompt and its grader, under one name.

A suite (SWE-RL's Table 3: HumanEval+, MBPP+, CRUXEval-I/O, MATH, MMLU) is a `Suite` subclass
registered with `@SUITES.register("name")`; `mode=ood suite=name` finds it there, so a new
suite is one file and its name in the package's import line (actors/eval/ood/__init__.py).

    problems = suite.load(data)          the problems, each with its chat prompt and what the
                                         grader needs; `data` is the path the user gave
                                         (`data=PATH`, a file downloaded once to shared
                                         storage: nothing is fetched at run time)
    verdicts = suite.grade(pairs, run)   (problem, answer) pairs -> one Verdict each, in order;
                                         `run` executes programs in the sandbox (programs.py)
                                         for the suites whose answers are code; what
                                         decides a verdict is compared here, on the host
    suite.reference(problem)             the answer a perfect model would give (`oracle=true`:
                                         a check of the loader, the grader and the sandbox)

A grader never raises for a bad answer: an answer with nothing to grade (no code, no
`Answer:` line) is a Verdict with `extracted=False`, counted apart from wrong answers.
"""

from __future__ import annotations

import gzip
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from conf.errors import UserError
from conf.registry import Registry


@dataclass(frozen=True)
class Problem:
    pid: str  # the set's own id ("HumanEval/0", "Mbpp/2", "sample_0", ...)
    messages: list[dict[str, str]]  # the chat prompt
    data: dict[str, Any] = field(default_factory=dict)  # what the grader needs (tests, the answer)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    extracted: bool  # the answer held something to grade (code, an answer line, a letter)
    timed_out: bool = False  # its program ran past the time limit (code suites)
    detail: str = ""  # why it failed, one line; or what was extracted
    # Other gradings of the same answer (MATH: "lenient", which also reads \boxed{}).
    also: dict[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Program:
    """One program for the sandbox: its source, run as `python -I main.py` in an empty folder."""

    source: str
    wall_s: float = 20.0


@dataclass(frozen=True)
class ProgramResult:
    report: bytes | None  # what it wrote to $SWE_RL_REPORT_FD (programs.py); None: past the cap
    timed_out: bool
    detail: str  # what killed it or the end of its stderr, when it did not exit 0 with a report


RunPrograms = Callable[[list[Program]], list[ProgramResult]]


class Suite(ABC):
    """One benchmark. Built with no arguments; holds no state between calls."""

    # Whether `data=PATH` is required (HumanEval reads the file its PyPI package installs).
    needs_data: ClassVar[bool] = True
    # What `data` names in the errors ("HumanEvalPlus.jsonl.gz").
    data_format: ClassVar[str] = ""
    # The score's name in summary.json and the table ("pass@1", "accuracy").
    metric: ClassVar[str] = "pass@1"

    @abstractmethod
    def load(self, data: str) -> list[Problem]:
        """The problems in the set's order; a missing or malformed file is a UserError naming it."""

    @abstractmethod
    def grade(self, pairs: list[tuple[Problem, str]], run: RunPrograms) -> list[Verdict]:
        """One verdict per (problem, answer), in order."""

    @abstractmethod
    def reference(self, problem: Problem) -> str:
        """The reference solution written as an answer to the suite's own prompt."""


SUITES: Registry[type[Suite]] = Registry("evaluation suite", "suite")


# -- reading the published files ------------------------------------------------------------------


def data_file(data: str, names: tuple[str, ...], what: str) -> Path:
    """`data` itself when it is a file, else the first of `names` inside that directory."""
    if not data:
        raise UserError(f"data=PATH is required: the {what} file ({' or '.join(names)}), downloaded once")
    path = Path(data)
    if path.is_file():
        return path
    for name in names:
        if (path / name).is_file():
            return path / name
    raise UserError(f"data={data!r}: no {what} file there (looked for {', '.join(names)})")


def read_jsonl(path: Path, required: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """The rows of a JSON-lines file (gzipped when its name ends in .gz), each checked for
    `required` fields; a bad line is a UserError naming the file and the line."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{n}: not JSON ({exc.msg})") from exc
            missing = [k for k in required if k not in row]
            if missing:
                raise UserError(f"{path}:{n}: missing field(s) {', '.join(missing)}")
            yield row
