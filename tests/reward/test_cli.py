"""`python -m reward.score`: one output line per input line, bad lines reported, fast start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reward import oracle_answer
from reward.score import run, score_line

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = {"a.py": "x = 1\n"}
ORACLE = {"a.py": "x = 2\n"}
PATCH = "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


INPUT_LINES = [
    json.dumps(
        {
            "id": "good",
            "code_context": CONTEXT,
            "oracle_new_content": ORACLE,
            "output": oracle_answer(CONTEXT, ORACLE),
            "extra": "ignored",
        }
    ),
    json.dumps({"id": 7, "code_context": CONTEXT, "oracle_new_content": ORACLE, "output": "no tags"}),
    "{not json",
    json.dumps({"id": "no-output", "code_context": CONTEXT, "oracle_new_content": ORACLE}),
    json.dumps({"id": "typed", "code_context": {"a.py": 1}, "oracle_new_content": ORACLE, "output": "x"}),
    json.dumps({"id": "patch", "oracle_patch": PATCH, "pred_patch": [PATCH]}),
    json.dumps({"id": "bad-patch", "oracle_patch": PATCH, "pred_patch": 3}),
    json.dumps({"code_context": CONTEXT, "oracle_new_content": ORACLE, "output": "x"}),
    json.dumps({"id": "nothing"}),
    json.dumps(
        {
            "id": "missing-search",
            "code_context": CONTEXT,
            "oracle_new_content": ORACLE,
            "output": "<think>t</think><solution>```\n### a.py\n<<<<<<< SEARCH\nnope\n=======\nx\n"
            ">>>>>>> REPLACE\n```</solution>",
        }
    ),
]
EXPECTED = [
    ("good", 1.0, None),
    (7, -1.0, "format: <think> occurs 0 times"),
    (None, None, "line: bad JSON"),
    ("no-output", None, "missing field: output"),
    ("typed", None, "field code_context['a.py']: expected a string, got int"),
    ("patch", 1.0, None),
    ("bad-patch", None, "field pred_patch: expected a unified diff string or a list of them, got int"),
    (None, None, "missing field: id"),
    (
        "nothing",
        None,
        "missing field: output (with code_context and oracle_new_content) or oracle_patch and pred_patch",
    ),
    ("missing-search", -1.0, "search block 1 not found in a.py"),
]


@pytest.mark.parametrize("workers", [1, 2])
def test_every_line_gets_a_record_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: int) -> None:
    write_lines(tmp_path / "in.jsonl", INPUT_LINES)
    counts = run(str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"), workers=workers, progress_interval_s=0.0)
    records = read_records(tmp_path / "out.jsonl")
    assert len(records) == len(EXPECTED)
    for record, (row_id, reward, error) in zip(records, EXPECTED):
        assert set(record) == {"id", "reward", "error"}
        assert (record["id"], record["reward"]) == (row_id, reward)
        assert (record["error"] is None) if error is None else record["error"].startswith(error), record
    assert counts == {"lines": 10, "scored": 2, "malformed": 2, "bad": 6, "timeouts": 0}
    assert "10/10 lines" in capsys.readouterr().err  # progress on stderr


def test_a_line_of_one_kind_with_fields_of_the_other_is_that_kind() -> None:
    # Kind (b) with a field of kind (a) beside it: other fields are ignored (it was rejected as
    # "missing fields: oracle_new_content, output").
    both = score_line(json.dumps({"id": "p", "oracle_patch": PATCH, "pred_patch": PATCH, "code_context": CONTEXT}))
    assert both == {"id": "p", "reward": 1.0, "error": None}
    # Neither kind complete: the closer one names what it lacks.
    assert score_line(json.dumps({"id": "q", "oracle_patch": PATCH}))["error"] == "missing field: pred_patch"
    half = score_line(json.dumps({"id": "r", "output": "x", "code_context": CONTEXT, "pred_patch": PATCH}))
    assert half["error"] == "missing field: oracle_new_content"


def test_command_line_runs_without_ray_or_torch(tmp_path: Path) -> None:
    write_lines(tmp_path / "in.jsonl", INPUT_LINES[:2])
    code = (
        "import runpy, sys; sys.argv = ['reward.score', '--input', sys.argv[1], '--output', sys.argv[2]]\n"
        "try:\n    runpy.run_module('reward.score', run_name='__main__')\n"
        "except SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
        "heavy = sorted(m for m in ('ray', 'torch', 'numpy') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert [r["reward"] for r in read_records(tmp_path / "out.jsonl")] == [1.0, -1.0]
    assert "2 lines: 1 scored, 1 malformed" in done.stderr


def test_a_line_that_is_not_utf8_costs_that_line_only(tmp_path: Path) -> None:
    good = INPUT_LINES[0].encode()
    (tmp_path / "in.jsonl").write_bytes(good + b"\n" + b'{"id": "latin1", "output": "caf\xe9"}\n' + good + b"\r\n")
    counts = run(str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"), progress_interval_s=1e9)
    records = read_records(tmp_path / "out.jsonl")
    assert [(r["id"], r["reward"]) for r in records] == [("good", 1.0), (None, None), ("good", 1.0)]
    assert records[1]["error"].startswith("line: not UTF-8 (byte 31")
    assert counts == {"lines": 3, "scored": 2, "malformed": 0, "bad": 1, "timeouts": 0}


def test_a_missing_input_file_is_named(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reward.score",
            "--input",
            str(tmp_path / "nope.jsonl"),
            "--output",
            str(tmp_path / "out.jsonl"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and f"--input {tmp_path / 'nope.jsonl'}: no such file" in done.stderr
    assert not (tmp_path / "out.jsonl").exists()
