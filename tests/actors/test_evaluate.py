"""The evaluation command: instance selection, scoring, the SWE-bench predictions file.

The oracle mode (no engine) must score exactly 1.0 everywhere with patches that rebuild the
oracle files, under our applier and under `git apply`; the model mode runs the real command
(vLLM in a subprocess, the tiny random model) once and checks what it wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors import evaluate as ev
from actors.eval import instances, oracle_context
from conf import eval as eval_config
from conf.config import ModelConfig
from data.demo import load_demo_rows
from data.loader import InstanceLoader
from data.patching import apply_patch, unified_diff
from data.schema import Instance, files_to_dict
from learner.models import resolve

REPO = Path(__file__).resolve().parents[2]
REAL = REPO.parent / "shared" / "data" / "requests_lite.jsonl"


def _exit_code(argv: list[str]) -> int:
    """The command's exit code: what main returns, or what its one-line error exits with."""
    try:
        return ev.main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture(scope="module")
def tiny() -> str:
    return resolve(ModelConfig(name="tiny"))


def _instance(context: dict[str, str], patch: str) -> Instance:
    """An instance with just what the predictions writer reads: the code context and the oracle patch."""
    return Instance("i", "o/r", "c", "bug", patch, None, dict(context), {})


def _cfg(tiny: str, *args: str) -> eval_config.EvalConfig:
    return eval_config.parse_args([f"model.name={tiny}", "data=demo", *args])


def _git_apply(files: dict[str, str], patch: str, root: Path) -> dict[str, str]:
    """Apply with git in a fresh repository holding `files`; return the touched files' contents."""
    shutil.rmtree(root, ignore_errors=True)
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content.encode())
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    proc = subprocess.run(["git", "apply", "-"], cwd=root, input=patch.encode(), capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()
    return {p: (root / p).read_bytes().decode() if (root / p).exists() else "" for p in files}


# -- oracle mode --------------------------------------------------------------------------------


def test_oracle_mode_scores_one_everywhere_and_its_patches_rebuild_the_oracle(tiny, tmp_path):
    report = oracle_context.evaluate(
        _cfg(tiny, "--oracle", "group_size=3", "tests=false")
    )  # tests: tests/test_execution.py
    s = report.summary
    assert s["instances"] == len(load_demo_rows()) == 17 and s["split"] == "all"
    assert s["patch_roundtrip_failures"] == 0
    for key in ("format_rate", "apply_rate", "mean_reward", "exact_match_rate"):
        assert s["greedy"][key] == 1.0 and s["sampled"][key] == 1.0, key
    assert s["sampled"]["answers"] == 17 * 3 and s["sampled"]["any_exact_rate"] == 1.0
    rows = {r["instance_id"]: r for r in load_demo_rows()}
    for pred in report.predictions:
        row = rows[pred["instance_id"]]
        context, oracle = files_to_dict(row["code_context"]), files_to_dict(row["oracle_new_content"])
        assert pred["model_name_or_path"] == "oracle" and pred["model_patch"].startswith("diff --git a/")
        assert apply_patch(context, pred["model_patch"]) == oracle_context.changed_files(context, oracle)
        # What the SWE-bench harness does first: git apply at the base commit.
        rebuilt = _git_apply(context, pred["model_patch"], tmp_path / "git")
        assert {p: rebuilt[p] for p in oracle if p in rebuilt} == {p: oracle[p] for p in oracle if p in context}


@pytest.mark.skipif(
    not REAL.exists(), reason=f"{REAL} is absent (real SWE-bench instances live outside the repository)"
)
def test_patches_of_real_oracle_changes_apply_with_git(tmp_path):
    for line in REAL.read_text().splitlines():
        row = json.loads(line)
        context, oracle = row["code_context"], row["oracle_new_content"]
        changed = oracle_context.changed_files(context, oracle)
        patch = oracle_context.model_patch(_instance(context, row["patch"]), changed)
        assert apply_patch(context, patch) == changed, row["instance_id"]
        rebuilt = _git_apply(context, patch, tmp_path / "git")
        assert {p: rebuilt[p] for p in changed if p in context} == {p: c for p, c in changed.items() if p in context}


# -- the diff writer ------------------------------------------------------------------------------

_lines = st.lists(st.sampled_from(["a", "b", "c", "", "  x = 1", "y\r"]), max_size=12)


@settings(max_examples=150, deadline=None)
@given(old=_lines, new=_lines, old_nl=st.booleans(), new_nl=st.booleans())
def test_file_patch_rebuilds_any_edit_byte_for_byte(old, new, old_nl, new_nl):
    before = "\n".join(old) + ("\n" if old_nl and old else "")
    after = "\n".join(new) + ("\n" if new_nl and new else "")
    if before == after:
        return
    assert apply_patch({"f.py": before}, unified_diff("f.py", before, after)) == {"f.py": after}


def test_created_deleted_and_unterminated_files(tmp_path):
    context = {"keep.py": "x = 1", "gone.py": "old\n", "empty/__init__.py": "", "new.py": ""}
    # The oracle creates new.py: its "" in the context is a file that does not exist yet.
    instance = _instance(
        context, "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+n\n"
    )
    changed = {"keep.py": "x = 2", "gone.py": "", "empty/__init__.py": "A = 1\n", "new.py": "made\n", "other.py": "o\n"}
    patch = oracle_context.model_patch(instance, changed)
    assert "deleted file mode" in patch and patch.count("new file mode") == 2  # new.py and other.py
    assert "\\ No newline at end of file" in patch
    assert apply_patch(context, patch) == changed
    on_disk = {p: c for p, c in context.items() if p != "new.py"}  # what the repository really holds
    rebuilt = _git_apply(on_disk, patch, tmp_path / "git")
    assert rebuilt == {"keep.py": "x = 2", "gone.py": "", "empty/__init__.py": "A = 1\n"}
    assert (tmp_path / "git" / "new.py").read_text() == "made\n" and not (tmp_path / "git" / "gone.py").exists()


def test_exact_match_needs_the_same_files_changed_the_same_way():
    from reward import oracle_answer, oracle_diffs

    row = load_demo_rows()[0]
    context, oracle = files_to_dict(row["code_context"]), files_to_dict(row["oracle_new_content"])
    answer, diffs = oracle_answer(context, oracle), oracle_diffs(context, oracle)
    exact = oracle_context.score(context, oracle, diffs, answer, 10.0)
    assert exact.exact and exact.reward == 1.0 and exact.new_content == oracle_context.changed_files(context, oracle)
    # The same fix plus a new file the oracle does not make: a valid answer, not an exact match.
    extra = "```python\n### extra.py\n<<<<<<< SEARCH\n\n=======\nX = 1\n>>>>>>> REPLACE\n```"
    outcome = oracle_context.score(context, oracle, diffs, answer.replace("</solution>", extra + "\n</solution>"), 10.0)
    assert -1.0 < outcome.reward < 1.0 and not outcome.exact and outcome.new_content["extra.py"] == "X = 1"
    malformed = oracle_context.score(context, oracle, diffs, "<think>x</think><solution>nothing</solution>", 10.0)
    assert (malformed.reward, malformed.format_ok, malformed.new_content) == (-1.0, False, None)


# -- selection and arguments ----------------------------------------------------------------------


def test_heldout_split_is_the_trainers(tiny):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    held = instances.select_items(_cfg(tiny, "heldout_fraction=0.3"), tokenizer)
    train = instances.select_items(_cfg(tiny, "heldout_fraction=0.3", "split=train"), tokenizer)
    held_ids, train_ids = {i.instance_id for i in held.items}, {i.instance_id for i in train.items}
    assert held_ids and train_ids and not held_ids & train_ids
    assert held_ids | train_ids == {r["instance_id"] for r in load_demo_rows()}
    assert held.skipped_other_split == len(train_ids)
    # The trainer's loader yields every held-out instance once per epoch: the ids it yields
    # before the first repeat are its held-out split.
    loader = InstanceLoader("demo", tokenizer, heldout_fraction=0.3, split="heldout")
    seen: list[str] = []
    while (iid := loader.next_batch(1)[0].instance_id) not in seen:
        seen.append(iid)
    assert set(seen) == held_ids
    assert len(instances.select_items(_cfg(tiny, "limit=5"), tokenizer).items) == 5


@pytest.mark.parametrize(
    "args, message",
    [
        (["sampels=4"], "sampels"),
        (["group_size=many"], "group_size"),
        (["split=test"], "split='test'"),
        (["split=train"], "split=train needs heldout_fraction > 0"),
        (["rollout.temperature=0"], "rollout.temperature=0.0"),
        (["model.dtype=float16"], "dtype='float16'"),
        (["oops"], "key=value"),
    ],
)
def test_bad_arguments_are_named(tiny, args, message, capsys):
    assert _exit_code([f"model.name={tiny}", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_model_directory_without_config_json_is_refused(tmp_path, capsys):
    assert _exit_code([f"model.name={tmp_path}"]) == 2  # learner/models.py's resolve, as in training
    assert f"model.name={str(tmp_path)!r}" in capsys.readouterr().err


# -- model mode: the real command -------------------------------------------------------------------


def test_model_mode_runs_the_command_and_writes_a_predictions_file(tiny, tmp_path):
    """Greedy and near-greedy sampling (temperature 1e-3) must agree: this checks that greedy
    answers really are greedy and that the sampled ones use the given temperature."""
    out = tmp_path / "eval"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [
        sys.executable,
        "-m",
        "actors.evaluate",
        f"model.name={tiny}",
        "data=demo",
        "limit=3",
        "group_size=2",
        "rollout.temperature=0.001",
        "rollout.max_new_tokens=12",
        f"out={out}",
        "predictions_name=tiny-random",
        "rollout.num_actors=0",  # in this process; the fleet: tests/actors/test_eval_session.py
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["instances"] == 3 and summary["mode"] == "model"
    assert summary["engines"]["where"] == "in-process"
    for kind in ("greedy", "sampled"):
        # A random model never writes the answer format.
        assert summary[kind]["format_rate"] == 0.0 and summary[kind]["mean_reward"] == -1.0
        assert summary[kind]["exact_match_rate"] == 0.0
    assert summary["sampled"]["answers"] == 6
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 3
    for p in predictions:
        assert set(p) == {"instance_id", "model_name_or_path", "model_patch"}
        assert p["model_name_or_path"] == "tiny-random" and p["model_patch"] == ""
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert [a["instance_id"] for a in answers] == [p["instance_id"] for p in predictions]
    for a in answers:
        assert a["greedy"]["text"] and a["greedy"]["error"].startswith("format:")
        assert [s["text"] for s in a["sampled"]] == [a["greedy"]["text"]] * 2
