"""The `model` injector's side of a bug: the prompt that asks the policy for one, and its answer
read back as a bug the proof pipeline takes (injector.py), in the same answer format as a fix.

The policy sees the repository's files (the working code, no test file, in an order drawn per
source and seed as build_messages draws it) and is asked, in words of our own, to break the
code so that a test of the repository would notice, as SEARCH/REPLACE edits inside the SWE-RL
answer format (`<think>...</think><solution>...</solution>`). The answer is parsed and applied
by the reward's own rules (reward.parse, reward.apply: proof.py's `model_draw` does that) and
handed here as the new content of each file it edited; `bug_from_files` turns that into
whole-file `Mutation`s (operator "model"), so the baseline, the two bug runs, the inverse check
and the instance are the rules injector's. Self-play
SWE-RL's injector works the same way, without a natural-language issue: the failing tests are
the bug's specification.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from data.bugs.mutations import Mutation, is_test_file
from data.prompt import fence, shuffled_files
from data.schema import Instance

SYSTEM_PROMPT = (
    "You are a software engineer who writes test cases for a team's bug-fixing drills. "
    "First reason inside <think> and </think>. Then give your change inside <solution> and </solution>."
)

INSTRUCTIONS = (
    "Introduce one realistic bug into the code above: a small change to one or two of these files "
    "that an engineer could plausibly make by mistake, and that at least one of the repository's "
    "existing tests would catch. Do not change, add or delete test files, and do not add comments "
    "that point at the bug.\n\n"
    "Write the change as SEARCH/REPLACE edits:\n\n"
    "```python\n### path/to/file.py\n<<<<<<< SEARCH\n    lines copied exactly from the current file\n"
    "=======\n    the lines that replace them\n>>>>>>> REPLACE\n```\n\n"
    "The SEARCH lines must match the file exactly, indentation included. "
    "Answer in this form: <think>your reasoning</think> <solution>your edits</solution>"
)


class Sampler(Protocol):
    """What writes a model's answers: n samples per conversation (ContextEngine's `sample`)."""

    def sample(
        self, ids: list[str], messages: list[list[dict[str, str]]], n: int, temperature: float
    ) -> list[list[str]]: ...


MAX_PROMPT_FILES = 20  # files shown, the smallest first when there are more


def bug_messages(source: Instance, tree: Mapping[str, str], seed: int) -> list[dict[str, str]]:
    """The injector's chat prompt for `tree`, the source's working code (test files left out)."""
    code = {p: c for p, c in tree.items() if p.endswith(".py") and not is_test_file(p)}
    if len(code) > MAX_PROMPT_FILES:
        code = dict(sorted(code.items(), key=lambda pc: (len(pc[1]), pc[0]))[:MAX_PROMPT_FILES])
    files = shuffled_files(code, seed, source.instance_id)
    shown = "\n\n".join(f"### {path}\n{fence(content)}" for path, content in files.items())
    user = f"Repository {source.repo}, its code:\n\n{shown}\n\n{INSTRUCTIONS}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def bug_from_files(tree: Mapping[str, str], new_content: Mapping[str, str]) -> tuple[tuple[Mutation, ...], str]:
    """(the bug, "") of an answer's edited files, or ((), why not): every file must be an
    existing non-test Python file of `tree`, and some file must change."""
    for path in sorted(new_content):
        if is_test_file(path):
            return (), f"edits a test file: {path}"
        if path not in tree:
            return (), f"not a file of the repository: {path}"
        if not path.endswith(".py"):
            return (), f"not a Python file: {path}"
    changed = {p: c for p, c in new_content.items() if c != tree[p]}
    if not changed:
        return (), "changes nothing"
    return tuple(Mutation(p, "model", 1, 0, len(tree[p]), tree[p], c) for p, c in sorted(changed.items())), ""
