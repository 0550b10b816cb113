"""`--context model` with a real engine: the tiny random model answers the build's questions
through the rollout worker (vLLM in a subprocess, as in test_evaluate.py). A random model names
no file, so every row falls back to the import heuristic: this checks the mechanics (batched
greedy calls, prompts over the budget not sent, the counts and the sidecar), not the picks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conf.config import ModelConfig
from data.fixtures.synthetic import generate_history
from learner.models import resolve

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys, time
import actors.rollout.context_engine as cm
from data.build import main

# The build starts the engine; keep it open past the build for the direct checks below.
engines, close = [], cm.ContextEngine.close
cm.ContextEngine.close = lambda self: engines.append(self)
start = time.perf_counter()
code = main(sys.argv[1:])
built = time.perf_counter() - start
(engine,) = engines
short = [{"role": "user", "content": "Which files? pkg/a.py"}]
long = [{"role": "user", "content": "word " * 2000}]
first = engine.ask(["a", "b", "c"], [short, long, short])
again = engine.ask(["a"], [short])
sampled = engine.sample(["a", "b"], [short, long], 3, 1.0)  # data.inject's model injector
close(engine)
print("RESULT", json.dumps({"first": first, "again": again, "sampled": sampled, "code": code, "build_s": built}))
"""


@pytest.fixture(scope="module")
def tiny() -> str:
    return resolve(ModelConfig(name="tiny"))


@pytest.mark.slow
def test_the_tiny_model_answers_the_builds_questions_in_batches(tiny: str, tmp_path: Path) -> None:
    repo, out = tmp_path / "synthetic", tmp_path / "out"
    generate_history(repo, num_prs=8)
    args = ["--git", str(repo), "--out", str(out), "--relevant-files", "1", "--context", "model"]
    args += ["model.name=tiny", "rollout.max_prompts_per_call=4", "rollout.max_new_tokens=8"]
    args += ["rollout.max_model_len=1024"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    result = json.loads(proc.stdout.split("RESULT ", 1)[1])
    first, again = result["first"], result["again"]
    # The long prompt (over 1024 - 8 tokens) is not sent; the others are answered, greedily.
    assert first[1] is None and isinstance(first[0], str) and first[0] and first[0] == first[2] == again[0]
    assert result["code"] == 0
    sampled = result["sampled"]  # n answers at a temperature, none for a prompt over the budget
    assert len(sampled[0]) == 3 and all(isinstance(t, str) for t in sampled[0]) and sampled[1] == []
    manifest = json.loads((out / "_manifest.json").read_text())
    kept, ctx = manifest["instances"], manifest["context"]
    assert kept >= 4 and ctx["model"] == "tiny" and ctx["asked"] == kept and ctx["too_long"] == 0
    assert sum(ctx["chosen"].values()) == kept and ctx["fallback"] == kept - ctx["chosen"]["model"]
    lines = [json.loads(ln) for ln in (out / "_manifest.context.jsonl").read_text().splitlines()]
    assert len(lines) == kept and all(isinstance(ln["answer"], str) for ln in lines)
