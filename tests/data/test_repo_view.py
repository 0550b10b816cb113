"""The repository as the Agentless evaluation shows it (data/agentless/repo_view.py) and its prompts'
answer readers (data/agentless/prompts.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from data.agentless.prompts import REPRO_TEST_PATH, localize_messages, read_test_file, repro_test_patch
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
