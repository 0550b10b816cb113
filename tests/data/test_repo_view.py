"""The repository as the Agentless evaluation shows it (data/agentless/repo_view.py) and its prompts'
answer readers (data/agentless/prompts.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from data.agentless.prompts import (
    REPRO_TEST_PATH,
    ReproTarget,
    localize_messages,
    read_test_file,
    repro_messages,
    repro_target,
    repro_test_patch,
)
from data.agentless.repo_view import RepoUnavailable, changed_paths, files_view, git_view, is_source, open_view
from data.demo import load_demo_rows
from data.git.repo import Repo
from data.patching import apply_patch, unified_diff
from data.schema import Instance


def test_only_the_projects_python_sources_are_shown():
    shown = ["pkg/a.py", "pkg/sub/b.pyi", "tests/test_a.py", "src/c.pyx"]
    hidden = [
        "pkg/_vendor/six.py",
        "third_party/x/y.py",
        "build/lib/pkg/a.py",
        "pkg.egg-info/x.py",
        "pkg/msg_pb2.py",
        "docs/index.rst",
        "logo.png",
        "pkg/__pycache__/a.cpython-311.pyc",
    ]
    assert [p for p in shown + hidden if is_source(p)] == shown


def test_javascript_sources_are_shown_but_not_their_builds_declarations_bundles_or_copies():
    shown = ["lib/a.js", "src/b.tsx", "src/c.mts", "index.cjs", "test/a.test.js", "src/__tests__/b.spec.ts"]
    hidden = [
        "node_modules/x/index.js",
        "dist/a.js",
        "build/b.js",
        "coverage/lcov-report/prettify.js",
        "types/index.d.ts",
        "src/a.d.mts",
        "public/jquery.min.js",
        "vendor/lodash.js",
        "bower_components/x/x.js",
        "package.json",
        "README.md",
    ]
    assert [p for p in shown + hidden if is_source(p, "javascript")] == shown
    # A Python repository shows no JavaScript (Django's admin scripts), a JavaScript one no Python;
    # JavaScript's skipped folders are its own (coveragepy's package is coverage/).
    assert not is_source("django/contrib/admin/static/admin/js/actions.js") and not is_source("x.py", "javascript")
    assert is_source("coverage/control.py")


def test_vendored_packages_below_the_top_level_are_hidden_but_a_monorepos_are_shown():
    # requests before 2.16 kept urllib3 and chardet in requests/packages/; setuptools its copies
    # in setuptools/extern/; a root packages/ directory is a monorepo's own code.
    hidden = [
        "requests/packages/__init__.py",
        "requests/packages/urllib3/connectionpool.py",
        "requests/packages/chardet/universaldetector.py",
        "setuptools/extern/__init__.py",
        "src/pkg/externals/six.py",
    ]
    shown = ["requests/packages.py", "requests/models.py", "packages/core/core/api.py", "extern/build.py"]
    assert [p for p in hidden + shown if is_source(p)] == shown


def test_the_demo_view_is_the_code_context_without_the_files_the_fix_creates():
    created = unified_diff("pkg/new.py", None, "X = 1\n")
    inst = Instance("i", "o/r", "c", "bug", created, None, {"pkg/new.py": "", "pkg/a.py": "A = 1\n"}, {})
    view = files_view(inst)
    assert view.files == ["pkg/a.py"] and view.read("pkg/a.py") == "A = 1\n" and view.read("pkg/new.py") is None
    demo = Instance.from_row(load_demo_rows()[1])  # demo__calspan-8: two changed files
    assert changed_paths(demo, files_view(demo).files) == list(demo.oracle_new_content)


def _git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def test_a_clone_is_read_at_the_base_commit(tmp_path):
    root = tmp_path / "requests"
    (root / "pkg").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / "pkg" / "a.py").write_text("A = 1\n")
    (root / "pkg" / "blob.py").write_bytes(b"\x00\x01binary")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    base = _git(root, "rev-parse", "HEAD")
    (root / "pkg" / "a.py").write_text("A = 2\n")
    (root / "pkg" / "later.py").write_text("L = 1\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "later")
    inst = Instance("i", "psf/requests", base, "bug", "", None, {}, {})
    view = open_view(inst, "git", {"requests": root})  # found by the repository's name
    assert view.files == ["pkg/a.py", "pkg/blob.py"]
    assert view.read("pkg/a.py") == "A = 1\n" and view.read("pkg/blob.py") is None
    with Repo(root) as repo, pytest.raises(RepoUnavailable, match="no commit"):
        git_view(repo, "0" * 40)
    with pytest.raises(RepoUnavailable, match="no local clone"):
        open_view(inst, "git", {})


def test_prompts_and_answers():
    messages = localize_messages("It breaks.", ["pkg/a.py", "pkg/sub/b.py"], 2)
    assert "pkg/\n  a.py\n  sub/\n    b.py" in messages[1]["content"] and "at most 2" in messages[1]["content"]
    test = "from pkg.a import A\n\ndef test_a():\n    assert A == 2\n"
    answer = f"<think>```python\ndef test_draft(): pass\n```</think><solution>```python\n{test}```</solution>"
    assert read_test_file(answer) == test  # the answer's block, not the reasoning's
    assert read_test_file("<solution>```python\nprint(1)\n```</solution>") is None
    assert read_test_file("no code at all") is None
    assert apply_patch({}, repro_test_patch(test)) == {REPRO_TEST_PATH: test}


def test_a_javascript_instance_is_asked_for_its_runners_test_file_beside_its_own_tests():
    target = repro_target("javascript", "vitest", ["src/__tests__/router.spec.ts", "test/x.test.js"])
    assert target == ReproTarget("javascript", "vitest", "src/__tests__/swe_rl_reproduction.spec.ts",
                                 "src/__tests__/router.spec.ts")  # fmt: skip
    assert target.fence == "typescript"
    assert repro_target("javascript", "mocha", ["test/app.router.js"]).path == "test/swe_rl_reproduction.test.js"
    assert repro_target("javascript", "jest", []).path == "test/swe_rl_reproduction.test.js"
    assert repro_target("python", "django", ["tests/x.py"]) == ReproTarget()  # Python's: pytest at the root
    content = repro_messages("It breaks.", {"lib/a.js": "x"}, target)[1]["content"]
    assert "import `test`, `expect`" in content and "from 'vitest'" in content and "pytest" not in content
    assert "saved as src/__tests__/swe_rl_reproduction.spec.ts" in content and "```typescript" in content
    assert "src/__tests__/router.spec.ts" in content
    node = repro_messages("It breaks.", {}, repro_target("javascript", "node-test", ["test/a.test.mjs"]))
    assert "'node:test'" in node[1]["content"] and "```javascript" in node[1]["content"]
    python = repro_messages("It breaks.", {"pkg/a.py": "x"})[1]["content"]
    assert "Write a pytest test file" in python and "```python fenced block" in python


def test_a_javascript_answer_is_read_from_a_js_or_ts_block_with_a_test_in_it():
    js = ReproTarget("javascript", "jest", "test/swe_rl_reproduction.test.js")
    test = "const { add } = require('../lib/add');\ntest('sign', () => { expect(add(1, -2)).toBe(-1); });\n"
    for tag in ("javascript", "js", "typescript", "ts", ""):
        assert read_test_file(f"<solution>```{tag}\n{test}```</solution>", js) == test, tag
    mocha = "describe('add', () => {\n  it('keeps the sign', () => {});\n});"
    assert read_test_file(f"```js\n{mocha}\n```", js) == mocha + "\n"
    assert read_test_file("```js\nconsole.log(1)\n```", js) is None  # no test in it
    assert read_test_file(f"```python\n{test}```", js) is None  # not a JavaScript block
    assert read_test_file(f"```js\n{test}```") is None  # a Python target reads Python only
    created = apply_patch({}, repro_test_patch(test, js.path))
    assert created == {"test/swe_rl_reproduction.test.js": test}
