"""Bug reports written by a model (`data.inject --issue-model`) from a kept bug's failing tests.

The default issue text of an injected instance is the failing tests' report (injector.py
`issue_text`): exact, but unlike the issues SWE-RL trains on, which are a user's words about a
symptom. With `--issue-model` the model is shown that report and the buggy code of the files
the bug touched (what a user who hit the failure could read) and asked, in words of our own,
for a report in a user's voice: what was expected, what happened, how to see it, never where
the fault is or how to mend it.

A report is taken only when it says nothing of the fix. The check is mechanical, since the
instance's reward must not depend on the model's judgement of itself: the answer (its
`<think>` part dropped) must hold no line of code that the oracle patch adds, and it must be of
a reader's length, with no sentence said three times over (a small model's loop). An answer
that fails keeps the test report as the issue, and the reason is counted (`leaks_fix`,
`unusable`), so no instance is lost to a bad report.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from data.bugs.model_bugs import Sampler
from data.patching import parse_patch
from data.prompt import fence
from data.schema import Instance

SYSTEM_PROMPT = (
    "You are a user of an open-source project who files clear, factual bug reports. "
    "You describe what you saw, never where in the code the fault is or how to mend it."
)

INSTRUCTIONS = (
    "The project's test suite fails after a recent change. Its report and the code of the files "
    "involved are above. Write the GitHub issue a user who hit this behaviour would file: a short "
    "title line, what they expected, what happened instead, and a small example that shows it. "
    "Do not say which line or function is wrong, do not suggest a change to the code, and do not "
    "quote the test names. Write only the issue."
)

MIN_CHARS, MAX_CHARS = 40, 4000  # a report shorter says nothing; longer is no user's report
MAX_REPEATS = 3  # a sentence (20 characters or more) said this often: the model looped
MIN_LEAK_CHARS = 8  # an added line shorter than this ("return", "pass") names nothing


@dataclass(frozen=True)
class IssueReport:
    text: str  # the issue the instance gets: the model's report, or the test report kept
    reason: str  # "model" (the report was taken), "leaks_fix" or "unusable"
    detail: str = ""


def issue_messages(inst: Instance) -> list[dict[str, str]]:
    """The chat prompt for a kept bug: the failing tests' report and the buggy files it touched."""
    touched = sorted(inst.oracle_new_content)
    shown = "\n\n".join(f"### {p}\n{fence(inst.code_context.get(p, ''))}" for p in touched)
    user = f"Repository {inst.repo}.\n\nThe test report:\n\n{inst.problem_statement}\n\n{shown}\n\n{INSTRUCTIONS}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def added_lines(patch: str) -> list[str]:
    """The code lines a patch adds (read by data/patching.py's parser), stripped, of at least
    MIN_LEAK_CHARS."""
    added = (ln[1:].strip() for fp in parse_patch(patch) for h in fp.hunks for ln in h.lines if ln[0] == "+")
    return [code for code in added if len(code) >= MIN_LEAK_CHARS]


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def read_report(answer: str, inst: Instance) -> IssueReport:
    """The model's answer as the instance's issue, or the test report kept and why."""
    text = re.sub(r"<think>.*?</think>", "", answer, flags=re.DOTALL).strip()
    if not MIN_CHARS <= len(text) <= MAX_CHARS:
        return IssueReport(inst.problem_statement, "unusable", f"{len(text)} characters")
    sentences = Counter(_squash(x).strip().lower() for x in re.split(r"[.!?\n]+", text))
    looped = [x for x, n in sentences.items() if n >= MAX_REPEATS and len(x) >= 20]
    if looped:  # a small model's loop: the same sentence over and over is no report
        return IssueReport(inst.problem_statement, "unusable", f"repeats: {looped[0][:80]}")
    flat = _squash(text)
    for code in added_lines(inst.patch):
        if _squash(code) in flat:
            return IssueReport(inst.problem_statement, "leaks_fix", code[:120])
    return IssueReport(text + "\n", "model")


def write_reports(instances: Sequence[Instance], sampler: Sampler, temperature: float = 0.0) -> list[IssueReport]:
    """One report per instance, in order, from one batch of the sampler."""
    if not instances:
        return []
    answers = sampler.sample([i.instance_id for i in instances], [issue_messages(i) for i in instances], 1, temperature)
    return [
        read_report(texts[0], inst) if texts else IssueReport(inst.problem_statement, "unusable", "prompt too long")
        for inst, texts in zip(instances, answers, strict=True)
    ]
