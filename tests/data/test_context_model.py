"""`--context model`: the question, the reading of the answer, and the build step around them
with a fake model (the real engine: tests/actors/test_context_model.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from actors.rollout import context_engine
from data import build as build_mod
from data.build import BuildConfig, build, parse_args
from data.context.question import candidate_files, question, read_answer
from data.fixtures.synthetic import generate_history
from data.mining.context_step import SIDECAR, ContextConfig

TREE = [
    "README.md",
    "pkg/__init__.py",
    "pkg/api.py",
    "pkg/models.py",
    "pkg/sub/deep.py",
    "other/models.py",
    "docs/conf.py",
    "tests/test_api.py",
    "setup.py",
]


def _q(k: int = 2, max_tree_files: int = 50):
    return question(
        "x-1",
        "Session drops headers\nbody",
        "--- a/pkg/api.py\n+++ b/pkg/api.py\n@@ -1 +1 @@\n-a\n+b\n",
        ["pkg/api.py"],
        TREE,
        k,
        max_tree_files=max_tree_files,
        max_text_chars=1000,
    )


def test_candidates_leave_out_changed_files_tests_and_non_code_and_keep_the_nearest() -> None:
    files = candidate_files(TREE, ["pkg/api.py"], 0)
    assert files == [
        "docs/conf.py",
        "other/models.py",
        "pkg/__init__.py",
        "pkg/models.py",
        "pkg/sub/deep.py",
        "setup.py",
    ]
    # Over the cap, files in the changed file's directory (and below) come first.
    assert candidate_files(TREE, ["pkg/api.py"], 3) == ["pkg/__init__.py", "pkg/models.py", "pkg/sub/deep.py"]


def test_the_question_shows_the_issue_the_changes_and_the_candidates_tree() -> None:
    q = _q()
    user = q.messages[-1]["content"]
    assert q.messages[0]["role"] == "system" and q.messages[-1]["role"] == "user"
    assert "Session drops headers" in user and "+b" in user and "at most 2 full paths" in user
    tree = user.split("<repository_files>\n")[1].split("\n</repository_files>")[0]
    assert "api.py" not in tree and "test_api.py" not in tree and "README.md" not in tree
    assert "pkg/\n  __init__.py\n  models.py\n  sub/\n    deep.py" in tree
    long = question("x", "y" * 50, "z" * 50, [], TREE, 1, max_tree_files=5, max_text_chars=10)
    assert "y" * 11 not in long.messages[-1]["content"] and "[... trimmed]" in long.messages[-1]["content"]


def test_the_answer_keeps_at_most_k_candidates_and_counts_what_it_drops() -> None:
    text = "1. `pkg/models.py`\n2. pkg/api.py\n3. ghost/none.py\n- deep.py\n- setup.py\n"
    a = read_answer(text, _q(k=2), 2)
    assert a.picks == ["pkg/models.py", "pkg/sub/deep.py"]  # a unique suffix maps to its path
    assert a.unknown == ["ghost/none.py"] and a.not_candidates == ["pkg/api.py"]
    # "models.py" is ambiguous (pkg/ and other/): unknown, not a guess.
    assert read_answer("models.py", _q(), 2).picks == [] and read_answer("models.py", _q(), 2).unknown == ["models.py"]
    assert read_answer("I cannot tell.", _q(), 2) == read_answer("", _q(), 2)


class FakeAsker:
    """Names the first candidate of each question, a missing file and a changed file (or
    nothing, for ids in `silent`); records the size of each call."""

    def __init__(self, silent: set[str]) -> None:
        self.silent, self.calls, self.closed = silent, [], False

    def ask(self, ids: list[str], messages: list[list[dict[str, str]]]) -> list[str | None]:
        self.calls.append(len(ids))
        out: list[str | None] = []
        for i, m in zip(ids, messages, strict=True):
            tree = m[-1]["content"].split("<repository_files>\n")[1]
            first_dir = tree.splitlines()[0]  # the synthetic tree: "pkg/" then its files
            first = tree.splitlines()[1].strip()
            out.append("" if i in self.silent else f"{first_dir}{first}\nnope/missing.py\n")
        return out

    def close(self) -> None:
        self.closed = True


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("synthetic")
    generate_history(path, num_prs=24)
    return path


def test_build_asks_in_batches_adds_the_picks_and_falls_back_to_imports(
    synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeAsker(silent={"example__synthetic-24"})
    monkeypatch.setattr(context_engine, "engine_asker", lambda cfg, seed, on_ray: lambda: fake)
    imports = build(BuildConfig(git=(str(synthetic),), out=str(tmp_path / "imports"), relevant_files=1))
    cfg = BuildConfig(
        git=(str(synthetic),), out=str(tmp_path / "model"), relevant_files=1, context=ContextConfig("model", batch=8)
    )
    manifest = build(cfg)
    assert fake.calls == [8, 8, 3] and fake.closed  # 19 kept rows, in batches of 8
    assert manifest["counts"] == imports["counts"]
    ctx = manifest["context"]
    assert ctx["asked"] == 19 and ctx["answers_with_picks"] == 18 and ctx["files_added"] == 18
    assert ctx["unknown_paths"] == 18 and ctx["fallback"] == 1
    assert ctx["chosen"] == {"model": 18, "imports_fallback": 1, "none": 0}
    rows = pads.dataset(tmp_path / "model").to_table().to_pylist()
    before = pads.dataset(tmp_path / "imports").to_table().to_pylist()
    assert [r["instance_id"] for r in rows] == [r["instance_id"] for r in before]  # order kept
    for row, old in zip(rows, before, strict=True):
        paths = [f["path"] for f in row["code_context"]]
        if row["instance_id"] == "example__synthetic-24":  # silent: the import heuristic's files
            assert row["code_context"] == old["code_context"]
        else:  # the changed file, then the model's pick: the first candidate of the tree
            assert paths[:-1] == [f["path"] for f in old["code_context"]][:-1] and paths[-1] == "pkg/__init__.py"
    lines = [json.loads(ln) for ln in (tmp_path / "model" / SIDECAR).read_text().splitlines()]
    assert [ln["instance_id"] for ln in lines] == [r["instance_id"] for r in rows]
    silent = next(ln for ln in lines if ln["instance_id"] == "example__synthetic-24")
    assert silent["chosen"] == "imports_fallback" and silent["picks"] == [] and silent["added"] == ["pkg/base.py"]
    assert lines[1] | {"answer": ""} == {
        "instance_id": rows[1]["instance_id"],
        "picks": ["pkg/__init__.py"],
        "unknown": ["nope/missing.py"],
        "answer": "",
        "chosen": "model",
        "added": ["pkg/__init__.py"],
    }


def test_context_flags_and_their_checks(tmp_path: Path) -> None:
    cfg = parse_args(
        ["--git", "g", "--out", "o", "--context", "model", "model.name=tiny", "rollout.max_prompts_per_call=4"]
    )
    assert cfg.context == ContextConfig(mode="model", model="tiny", batch=4)
    assert parse_args(["--git", "g"]).context == ContextConfig()
    bad = BuildConfig(git=("g",), out=str(tmp_path), context=ContextConfig("model", max_new_tokens=4096))
    with pytest.raises(build_mod.InputError, match="rollout.max_model_len must exceed"):
        build(bad)
    with pytest.raises(build_mod.InputError, match="rollout.max_prompts_per_call must be >= 1"):
        build(BuildConfig(git=("g",), out=str(tmp_path), context=ContextConfig("model", batch=0)))
