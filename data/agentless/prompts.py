"""The prompts of the Agentless-Mini evaluation's localization and reproduction-test stages, and
readers of their answers. The repair stage uses the training prompt (data/prompt.py) unchanged.

Our own wording. The paper's Agentless Mini localizes in one step (the issue and the
repository's tree -> the files to edit) and asks for reproduction tests given the issue and
the localized code; we do the same, with the answer shapes that are easy to read back from a
small model: a list of paths (read by data/file_picks.read_picks, tolerant of numbering,
prose and suffixes) and one pytest file in a fenced block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from data.context.file_picks import render_tree
from data.patching import unified_diff
from data.prompt import SYSTEM_PROMPT, fence

LOCALIZE_SYSTEM = (
    "You are a software engineer who finds where a bug lives in a repository. "
    "Answer with file paths copied from the repository tree, one per line."
)
REPRO_SYSTEM = SYSTEM_PROMPT.replace("Then give your fix", "Then give your test")

# The file a reproduction test is written to, at the repository's root (its own directory on
# the import path, as pytest's default rootdir insertion puts it): a name no repository uses.
REPRO_TEST_PATH = "test_swe_rl_reproduction.py"

_BLOCK_RE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def _issue(problem_statement: str) -> str:
    return f"--- BEGIN ISSUE ---\n{problem_statement.strip()}\n--- END ISSUE ---"


def localize_messages(problem_statement: str, tree_paths: list[str], top_n: int) -> list[dict[str, str]]:
    """Chat messages asking for the `top_n` files to edit, most likely first."""
    user = (
        "We are fixing the following issue in a repository.\n\n"
        f"{_issue(problem_statement)}\n\n"
        "The repository's source files:\n\n"
        f"--- BEGIN TREE ---\n{render_tree(tree_paths)}\n--- END TREE ---\n\n"
        f"Which files must be edited to fix the issue? Name at most {top_n}, the most likely "
        "first, each as its full path from the repository's root (directories joined by '/'), "
        "one per line, and nothing else."
    )
    return [{"role": "system", "content": LOCALIZE_SYSTEM}, {"role": "user", "content": user}]


def answer_part(text: str) -> str:
    """The text after the model's reasoning (`</think>`), or all of it when there is none."""
    return text.rsplit("</think>", 1)[-1]


def repro_messages(problem_statement: str, files: Mapping[str, str]) -> list[dict[str, str]]:
    """Chat messages asking for one pytest file that fails while the issue is present."""
    shown = "\n\n".join(f"### {path}\n{fence(content)}" for path, content in files.items())
    user = (
        "We are fixing the following issue in a repository.\n\n"
        f"{_issue(problem_statement)}\n\n"
        "Relevant files, with their full content:\n\n"
        f"--- BEGIN FILES ---\n{shown}\n--- END FILES ---\n\n"
        "Write a pytest test file that reproduces the issue: its tests must fail on the code "
        "above and pass once the issue is fixed. It runs from the repository's root, so import "
        "the package by its name. Give the whole file in one ```python fenced block.\n\n"
        "Answer in this form: <think>your reasoning</think> <solution>the test file</solution>"
    )
    return [{"role": "system", "content": REPRO_SYSTEM}, {"role": "user", "content": user}]


def read_test_file(text: str) -> str | None:
    """The last fenced block of the answer that defines a test function; None when there is none."""
    blocks = [b for b in _BLOCK_RE.findall(answer_part(text)) if re.search(r"^\s*def test", b, re.MULTILINE)]
    if not blocks:
        return None
    body = blocks[-1]
    return body if body.endswith("\n") else body + "\n"


def repro_test_patch(test_file: str) -> str:
    """A diff creating the reproduction test file: the test patch of its sandbox runs."""
    return unified_diff(REPRO_TEST_PATH, None, test_file)
