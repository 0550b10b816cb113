"""The Agentless-Mini evaluation (actors/eval/agentless_mini.py) on the demo set, and its
sandbox stages on a small JavaScript repository (tests/reward/jsrepos.py).

The stages' logic runs in-process with scripted answers (a Generator whose answers the test
writes) and a local Runner instead of the pool; the oracle switches must resolve every
instance; the tiny random model runs the real command once, for the mechanics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from actors import evaluate as ev
from actors.eval import agentless_mini as agentless
from actors.eval.agentless_sandbox import Case, case_repro_target, fallback_figures, rerank, run_tests
from actors.observe.phases import PhaseTimer
from conf import eval as eval_config
from conf.config import ExecutionConfig, ModelConfig
from data.agentless.repo_view import changed_paths, files_view
from data.demo import load_demo_rows
from data.patching import apply_patch, make_patch
from data.schema import Instance
from learner.models import resolve
from reward import oracle_answer
from reward.execution import sandbox
from reward.execution.environments import EnvSpec
from reward.execution.runner import Runner
from tests.reward import jsrepos

REPO = Path(__file__).resolve().parents[2]
needs_sandbox = pytest.mark.skipif(sandbox.available() is not None, reason=f"no sandbox: {sandbox.available()}")


def _exit_code(argv: list[str]) -> int:
    """The command's exit code: what main returns, or what its one-line error exits with."""
    try:
        return ev.main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture(scope="module")
def tiny() -> str:
    return resolve(ModelConfig(name="tiny"))


class Scripted(agentless.Generator):
    """Answers per stage from `script[stage](instance_id)`; every prompt fits."""

    def __init__(self, cfg: eval_config.EvalConfig, script: dict) -> None:
        super().__init__(cfg, tokenizer=None)
        self.script = script
        self.calls: list[str] = []
        self.messages: list[list[dict[str, str]]] = []  # every prompt, in order

    def encode(self, messages: list[dict[str, str]]) -> list[int] | None:
        self.messages.append(messages)
        return [0]

    def start(self):
        return None

    def __call__(self, stage, prompts, n, temperature):
        self.calls.append(stage)
        return [self.script[stage](key)[:n] for key, _ in prompts]


def _local_runs(tmp_path: Path):
    runner = Runner(ExecutionConfig(cache_dir=str(tmp_path / "cache")))
    return lambda jobs, what: [runner.run(job) for job in jobs]


def _cfg(tiny: str, *args: str) -> eval_config.EvalConfig:
    return eval_config.parse_args([f"model.name={tiny}", "data=demo", "mode=agentless", *args])


def test_localization_drops_and_counts_files_that_do_not_exist(tiny):
    inst = Instance.from_row(load_demo_rows()[1])  # demo__calspan-8: changes calspan/months.py and span.py
    view = files_view(inst)
    case = Case(inst, view, changed_paths(inst, view.files))
    answer = "Sure! The files are:\n1. `calspan/nowhere.py`\n2. ./months.py\n3. lib/calspan/span.py\n"
    gen = Scripted(_cfg(tiny), {"localize": lambda key: [answer]})
    figures = agentless.localize(_cfg(tiny, "localize_top=3"), [case], gen)
    assert case.localized == ["calspan/months.py"]  # a suffix at a directory boundary maps; the rest do not
    assert case.unknown == ["calspan/nowhere.py", "lib/calspan/span.py"]
    assert figures["recall_at_n"] == 0.5 and figures["unknown_paths"] == 2
    assert figures["instances_naming_unknown_paths"] == 1 and figures["all_found_rate"] == 0.0


@needs_sandbox
def test_with_both_oracle_switches_every_instance_resolves(tiny, tmp_path):
    switches = ("oracle_localize=true", "oracle_repair=true", "repro_tests=0")
    cfg = _cfg(tiny, "limit=2", "group_size=2", *switches, "reward.execution.num_runners=0")  # in this process: no Ray
    summary, predictions = agentless.evaluate(cfg)
    assert summary["instances"] == 2 and summary["localization"]["recall_at_n"] == 1.0
    assert summary["candidates"] == {
        "generated": 4,
        "applied": 4,
        "unique": 2,  # the two identical samples of each instance are one candidate
        "survive_regression": 2,
        "survive_repro": 0,
        "instances_without_files": 0,
    }
    assert summary["resolve_rate"] == 1.0 and summary["best_candidate_resolve_rate"] == 1.0
    assert summary["harness"]["resolved_ids"] == sorted(p["instance_id"] for p in predictions)
    rows = {r["instance_id"]: Instance.from_row(r) for r in load_demo_rows()}
    for p in predictions:  # the final patch rebuilds the oracle's files
        inst = rows[p["instance_id"]]
        assert apply_patch(inst.code_context, p["model_patch"]) == inst.oracle_new_content


@needs_sandbox
def test_reproduction_tests_are_kept_when_they_fail_and_filter_the_candidates(tiny, tmp_path):
    inst = Instance.from_row(load_demo_rows()[0])  # demo__calspan-3
    (path,) = inst.oracle_new_content
    fix = oracle_answer(inst.code_context, inst.oracle_new_content)
    line = next(x for x in inst.code_context[path].splitlines() if inst.code_context[path].count(x) == 1)
    edit = f"### {path}\n<<<<<<< SEARCH\n{line}\n=======\n{line}\n# touched\n>>>>>>> REPLACE"
    noop = f"<think>no fix</think><solution>```python\n{edit}\n```</solution>"  # applies, fixes nothing
    (test_file,) = apply_patch({}, inst.test_patch or "").values()
    script = {
        "localize": lambda key: [f"{path}\n"],
        "repair": lambda key: [noop, fix],  # one vote each: the reproduction test decides
        "reproduce": lambda key: [f"<solution>```python\n{test_file}```</solution>", "no test here"],
    }
    cfg = _cfg(tiny, "limit=1", "group_size=2", "repro_tests=2")
    gen = Scripted(cfg, script)
    summary, predictions = agentless.evaluate(cfg, _local_runs(tmp_path), gen)
    assert gen.calls == ["localize", "repair", "reproduce"]
    assert summary["reproduction"] == {"written": 1, "kept": 1, "instances_with_kept_test": 1, "per_instance": 2}
    c = summary["candidates"]
    assert (c["generated"], c["applied"], c["unique"], c["survive_regression"], c["survive_repro"]) == (2, 2, 2, 2, 1)
    assert summary["resolve_rate"] == 1.0 and summary["best_candidate_resolve_rate"] == 1.0
    assert apply_patch(inst.code_context, predictions[0]["model_patch"]) == inst.oracle_new_content


EXISTING_TESTS = """from tinylru.cache import LRUCache


def test_clear_resets_the_counters():
    cache = LRUCache(maxsize=2)
    cache.get("missing")
    cache.clear()
    assert cache.info()["misses"] == 0


def test_already_failing_on_the_original():
    assert LRUCache(maxsize=2).maxsize == 3
"""


@needs_sandbox
def test_without_pass_to_pass_the_repositorys_own_tests_drop_a_candidate_that_breaks_them(tiny, tmp_path):
    base = Instance.from_row(next(r for r in load_demo_rows() if r["instance_id"] == "demo__tinylru-4"))
    assert not base.pass_to_pass  # the case the fallback is for
    existing = {"tinylru/__init__.py": "", "tests/test_cache_existing.py": EXISTING_TESTS}
    inst = replace(base, code_context={**base.code_context, **existing})
    (path,) = inst.oracle_new_content
    fixed = inst.oracle_new_content[path]
    assert fixed.count("self.hits = self.misses = 0") == 1
    broken = fixed.replace("self.hits = self.misses = 0", "self.hits = 0")  # fixes the issue, breaks clear()
    answers = [oracle_answer(inst.code_context, {path: broken}), oracle_answer(inst.code_context, {path: fixed})]
    view = files_view(inst)
    case = Case(inst, view, changed_paths(inst, view.files))
    cfg = _cfg(tiny, "group_size=2", "repro_tests=0", "oracle_localize=true")
    agentless.localize(cfg, [case], Scripted(cfg, {}))
    agentless.repair(cfg, [case], Scripted(cfg, {"repair": lambda key: answers}))
    assert len(case.candidates) == 2  # one vote each: without the fallback the first (broken) one wins
    timer = PhaseTimer()
    run_tests([case], [], _local_runs(tmp_path), timer)
    assert case.fallback_tests == ["tests/test_cache_existing.py"] and "regression_fallback_s" in timer.seconds
    base_run = case.fallback_baseline
    assert base_run is not None and base_run.outcomes == {
        "tests/test_cache_existing.py::test_clear_resets_the_counters": "passed",
        "tests/test_cache_existing.py::test_already_failing_on_the_original": "failed",  # not held against them
    }
    assert case.regression_ok == [False, True]
    assert rerank(case) == {"survive_regression": 1, "survive_repro": 0} and case.winner == 1
    assert fallback_figures([case]) == {
        "instances_without_pass_to_pass": 1,
        "instances": 1,
        "baseline_failed": 0,
        "test_files": 1,
        "dropped": 1,
    }
    assert case.runs[1] is not None and case.runs[1].resolved


def test_a_javascript_reproduction_test_goes_beside_the_repositorys_tests_in_the_labelled_folder():
    tree = dict.fromkeys(("lib/a.js", "test/unit/b.spec.js", "test/unit/c.spec.js", "test/e2e/z.test.ts"), "")
    env = EnvSpec(node="host", runner="jest").to_json()
    labelled = Instance("i", "o/r", "c", "bug", "", None, tree, {}, fail_to_pass=("test/unit/c.spec.js::a > b",),
                        environment=env)  # fmt: skip
    target = case_repro_target(Case(labelled, files_view(labelled, "javascript"), []))
    # The labelled file's folder, its first test file as the example (not the labelled one).
    assert (target.path, target.example, target.runner) == ("test/unit/swe_rl_reproduction.spec.js",
                                                            "test/unit/b.spec.js", "jest")  # fmt: skip
    unlabelled = replace(
        labelled,
        fail_to_pass=("test/new.test.js::x",),
        code_context={**tree, "test/e2e/y.test.ts": "", "test/e2e/x.test.ts": ""},
    )
    target = case_repro_target(Case(unlabelled, files_view(unlabelled, "javascript"), []))
    assert target.path == "test/e2e/swe_rl_reproduction.test.ts" and target.fence == "typescript"  # the most tests
    bare = replace(labelled, code_context={"lib/a.js": ""})
    assert case_repro_target(Case(bare, files_view(bare, "javascript"), [])).path == "test/swe_rl_reproduction.test.js"
    python = replace(labelled, environment=None)
    assert case_repro_target(Case(python, files_view(python), [])).path == "test_swe_rl_reproduction.py"


JS_REPRO = """const { test } = require('node:test');
const assert = require('assert');
const { add } = require('../lib/add');

test('keeps the sign of its second argument', () => {
  assert.strictEqual(add(1, -2), -1);
});
"""


@needs_sandbox
@pytest.mark.skipif(jsrepos.skip_reason() is not None, reason=str(jsrepos.skip_reason()))
def test_a_javascript_repository_goes_through_every_sandbox_stage_on_its_own_runner(tiny, tmp_path):
    """node's test runner on the add() bug without PASS_TO_PASS: the reproduction test is asked
    for, saved and run as a node:test file beside the repository's test; the fallback selects
    test/add.test.js by its require of lib/add.js and drops the candidate with two votes that
    passes the reproduction test but breaks `adds`; the fix wins and resolves."""
    inst = jsrepos.instance("node-test", pass_to_pass=())
    bug = inst.code_context["lib/add.js"]
    versions = {
        "broken": bug.replace("a + Math.abs(b)", "b < 0 ? a + b : a * b"),  # fixes the sign, breaks add(1, 2)
        "noop": bug + "// touched\n",  # fixes nothing
        "fix": jsrepos.FIX,
    }
    answers = {k: oracle_answer(inst.code_context, {"lib/add.js": v}) for k, v in versions.items()}
    view = files_view(inst, "javascript")
    assert view.files == ["lib/add.js", "test/add.test.js"]
    case = Case(inst, view, changed_paths(inst, view.files))
    cfg = _cfg(tiny, "group_size=4", "repro_tests=2", "oracle_localize=true")
    gen = Scripted(cfg, {
        "repair": lambda key: [answers["broken"], answers["noop"], answers["broken"], answers["fix"]],
        "reproduce": lambda key: [f"<solution>```javascript\n{JS_REPRO}```</solution>", "```python\ndef test_x(): pass\n```"],
    })  # fmt: skip
    agentless.localize(cfg, [case], gen)
    agentless.repair(cfg, [case], gen)
    written = agentless.write_repro_tests(cfg, [case], gen)
    prompt = gen.messages[-1][1]["content"]
    assert "'node:test'" in prompt and "saved as test/swe_rl_reproduction.test.js" in prompt and "pytest" not in prompt
    assert [apply_patch({}, p) for _, p in written] == [{"test/swe_rl_reproduction.test.js": JS_REPRO}]
    assert [c.patch for c in case.candidates] == [
        make_patch({"lib/add.js": bug}, {"lib/add.js": versions[k]}) for k in ("broken", "noop", "fix")
    ]
    with jsrepos.offline_npm():
        run_tests([case], written, _local_runs(tmp_path), PhaseTimer())
    assert len(case.repro_kept) == 1  # it fails on the original code
    assert case.fallback_tests == ["test/add.test.js"]
    base_run = case.fallback_baseline
    assert base_run is not None and base_run.outcomes == {"test/add.test.js::adds": "passed"}
    assert case.regression_ok == [False, True, True] and case.repro_passed == [0, 0, 1]
    assert rerank(case) == {"survive_regression": 2, "survive_repro": 1} and case.winner == 2
    assert [bool(r and r.resolved) for r in case.runs] == [True, False, True]


def test_the_tiny_model_runs_every_stage(tiny, tmp_path):
    """In this process (engines=0): the fleet doubled this test's time on the loaded 2-core CI
    machine (Ray and an actor's start); tests/actors/test_eval_session.py runs the same seam on
    a fleet of two and checks that it answers as this path does."""
    out = tmp_path / "eval"
    cmd = [sys.executable, "-m", "actors.evaluate", "mode=agentless", f"model.name={tiny}", "data=demo"]
    cmd += [
        "limit=2",
        "group_size=2",
        "repro_tests=1",
        "rollout.max_new_tokens=16",
        f"out={out}",
        "rollout.num_actors=0",
    ]
    proc = subprocess.run(
        cmd, cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1"), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "agentless" and summary["instances"] == 2
    # A random model names no file, writes no edit and no test: every count after generation is 0.
    assert summary["candidates"]["generated"] == 4 and summary["candidates"]["applied"] == 0
    assert summary["reproduction"]["kept"] == 0 and summary["resolve_rate"] == 0.0
    assert set(summary["seconds"]) >= {"engine_start", "localize", "repair", "reproduce", "regression", "total"}
    assert summary["engines"]["engines"] == 0 and summary["engines"]["where"] == "in-process"
    report = json.loads((out / "report.json").read_text())
    assert report["total_predictions"] == 2 and report["empty_patch"] == 2
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["model_patch"] for p in predictions] == ["", ""]
    assert "[eval] 2/2 localize prompts" in proc.stdout + proc.stderr  # progress per stage


def test_agentless_arguments(tiny, capsys):
    cfg = _cfg(tiny, "reward.execution.repos=[/clones/requests,'psf/flask=/m/flask']")
    assert cfg.reward.execution.repos == ["/clones/requests", "psf/flask=/m/flask"]
    for args, message in (
        (["mode=agentic"], "mode='agentic'"),
        (["mode=agentless", "localize_top=0"], "localize_top must be >= 1"),
        (["oracle_repair=true"], "switches of mode=agentless"),
    ):
        assert _exit_code([f"model.name={tiny}", *args]) == 2
        assert message in capsys.readouterr().err
