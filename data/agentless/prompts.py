"""The prompts of the Agentless-Mini evaluation's localization and reproduction-test stages, and
readers of their answers. The repair stage uses the training prompt (data/prompt.py) unchanged.

Our own wording. The paper's Agentless Mini localizes in one step (the issue and the
repository's tree -> the files to edit) and asks for reproduction tests given the issue and
the localized code; we do the same, with the answer shapes that are easy to read back from a
small model: a list of paths (read by data/file_picks.read_picks, tolerant of numbering,
prose and suffixes) and one test file in a fenced block.

The reproduction test is written for the runner of the instance's environment (`ReproTarget`):
a pytest file at the repository's root for a Python repository; for a JavaScript/TypeScript one,
a test file for its runner (JS_RUNNER_STYLES: jest, vitest, mocha, node's own), in a
```javascript or ```typescript block, saved beside the repository's own test files under a name
the runner's default patterns take (`repro_target`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

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
# A JavaScript reproduction test's file name before its suffix (`.test.js`, `.spec.ts`).
JS_REPRO_STEM = "swe_rl_reproduction"
# The folder and suffix of a JavaScript reproduction test when the repository shows no test file.
JS_REPRO_DEFAULT = "test/swe_rl_reproduction.test.js"

# What a test file for each JavaScript runner (reward/execution/runners.py's names) looks like,
# as the prompt asks for it; a runner without a row is asked for by its name alone.
JS_RUNNER_STYLES = {
    "jest": "a jest test file: `test(...)` blocks (grouped in `describe(...)` if you like) that check "
    "results with jest's global `expect`",
    "vitest": "a vitest test file: import `test`, `expect` (and `describe` if you use it) from 'vitest', "
    "then `test(...)` blocks that check results with `expect`",
    "mocha": "a mocha test file: `describe(...)` and `it(...)` blocks (mocha's globals) that check "
    "results with node's built-in `assert` module",
    "node-test": "a test file for node's built-in test runner: `test` (and `describe` if you use it) "
    "from 'node:test', checking results with node's built-in `assert` module",
}
_TS_SUFFIXES = (".ts", ".tsx", ".mts", ".cts")

_BLOCK_RE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_JS_BLOCK_RE = re.compile(r"```(?:javascript|js|jsx|mjs|cjs|typescript|ts|tsx)?[ \t]*\n(.*?)```", re.DOTALL)
_JS_TEST_RE = re.compile(r"\b(?:test|it)(?:\.\w+)*\s*\(")


@dataclass(frozen=True)
class ReproTarget:
    """Where a reproduction test is saved and what runs it: `language` "python" (pytest, at
    REPRO_TEST_PATH) or "javascript" (`runner`, at `path`; `example`: a test file of the
    repository in the same folder, whose module style the test follows)."""

    language: str = "python"
    runner: str = "pytest"
    path: str = REPRO_TEST_PATH
    example: str | None = None

    @property
    def fence(self) -> str:
        if self.language != "javascript":
            return "python"
        return "typescript" if self.path.endswith(_TS_SUFFIXES) else "javascript"


def repro_target(language: str, runner: str, test_files: Sequence[str]) -> ReproTarget:
    """The reproduction test's target for a repository whose environment runs `runner`
    (`language`: the runner's, runners.TestRunner.language). A JavaScript test goes in the folder
    of the first of `test_files` (the repository's own, nearest the instance first), with its
    extension, named `.test`/`.spec` as it is (`.test` when it is neither: jest's and vitest's
    default patterns take only those); JS_REPRO_DEFAULT when there is none."""
    if language != "javascript":
        return ReproTarget()
    if not test_files:
        return ReproTarget(language, runner, JS_REPRO_DEFAULT)
    example = PurePosixPath(test_files[0])
    marker = next((m for m in (".spec.", ".test.") if m in example.name), ".test.")
    path = example.with_name(f"{JS_REPRO_STEM}{marker[:-1]}{example.suffix}")
    return ReproTarget(language, runner, str(path), str(example))


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


def repro_messages(
    problem_statement: str, files: Mapping[str, str], target: ReproTarget = ReproTarget()
) -> list[dict[str, str]]:
    """Chat messages asking for one test file (pytest's, or `target`'s runner's) that fails while
    the issue is present."""
    shown = "\n\n".join(f"### {path}\n{fence(content)}" for path, content in files.items())
    if target.language == "javascript":
        style = JS_RUNNER_STYLES.get(target.runner, f"a test file for the {target.runner} test runner")
        like = f" (as the repository's test file {target.example} does)" if target.example else ""
        ask = (
            f"Write {style}, that reproduces the issue: its tests must fail on the code above and "
            f"pass once the issue is fixed. It is saved as {target.path} and run from the "
            f"repository's root, so load the repository's code by paths relative to that file, "
            f"with the same module syntax{like}. Give the whole file in one ```{target.fence} "
            "fenced block."
        )
    else:
        ask = (
            "Write a pytest test file that reproduces the issue: its tests must fail on the code "
            "above and pass once the issue is fixed. It runs from the repository's root, so import "
            "the package by its name. Give the whole file in one ```python fenced block."
        )
    user = (
        "We are fixing the following issue in a repository.\n\n"
        f"{_issue(problem_statement)}\n\n"
        "Relevant files, with their full content:\n\n"
        f"--- BEGIN FILES ---\n{shown}\n--- END FILES ---\n\n"
        f"{ask}\n\n"
        "Answer in this form: <think>your reasoning</think> <solution>the test file</solution>"
    )
    return [{"role": "system", "content": REPRO_SYSTEM}, {"role": "user", "content": user}]


def read_test_file(text: str, target: ReproTarget = ReproTarget()) -> str | None:
    """The last fenced block of the answer that defines a test (a `def test` function; for
    JavaScript a `test(` or `it(` call); None when there is none."""
    if target.language == "javascript":
        blocks = [b for b in _JS_BLOCK_RE.findall(answer_part(text)) if _JS_TEST_RE.search(b)]
    else:
        blocks = [b for b in _BLOCK_RE.findall(answer_part(text)) if re.search(r"^\s*def test", b, re.MULTILINE)]
    if not blocks:
        return None
    body = blocks[-1]
    return body if body.endswith("\n") else body + "\n"


def repro_test_patch(test_file: str, path: str = REPRO_TEST_PATH) -> str:
    """A diff creating the reproduction test file at `path`: the test patch of its sandbox runs."""
    return unified_diff(path, None, test_file)
