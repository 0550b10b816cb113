"""python -m data.inject (data/inject/): bugs injected into the demo set's fixed code, kept only
when its tests prove them; the kept instances resolve with their oracle patch and not without."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from conf.config import ExecutionConfig
from data.bugs.injector import BugCandidate, prove
from data.bugs.mutations import Mutation
from data.bugs.proof import inject
from data.inject.__main__ import main
from data.loader import read_instances
from reward.execution import sandbox
from reward.execution.runner import Runner, TestJob, TestRun

REPO = Path(__file__).resolve().parents[2]
needs_sandbox = pytest.mark.skipif(
    sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}"
)


@needs_sandbox
def test_the_demo_sets_fixed_code_gives_proved_bugs_and_a_funnel(injected):
    out, manifest, _ = injected
    assert manifest["sources"] == 2 and manifest["candidates"] == 6
    assert sum(manifest["counts"].values()) == 6 and manifest["kept"] == manifest["counts"].get("kept", 0) >= 1
    assert set(manifest["seconds"]) == {"sources", "baseline", "draw", "bugs", "confirm", "inverse", "instances"}
    kept = list(read_instances(str(out), 0))
    assert len(kept) == manifest["kept"] and sum(manifest["kept_by_operator"].values()) == len(kept)
    for inst in kept:
        assert inst.problem_source.startswith("injected:rules:") and ".inject" in inst.instance_id
        assert inst.fail_to_pass and set(inst.fail_to_pass).isdisjoint(inst.pass_to_pass or ())
        assert "tests/" not in inst.patch  # the bug, and so its inverse, never touches a test file
        assert all(name.split("::")[0] in inst.test_patch for name in inst.fail_to_pass)
        assert "After a recent change" in inst.problem_statement


@needs_sandbox
def test_a_kept_instance_resolves_with_its_oracle_and_not_without(injected, tmp_path):
    out, _, _ = injected
    runner = Runner(ExecutionConfig(cache_dir=str(tmp_path), wall_s=10.0))
    inst = next(iter(read_instances(str(out), 0)))
    gold, empty = runner.run(TestJob(inst, inst.patch)), runner.run(TestJob(inst, ""))
    assert (gold.status, gold.resolved) == ("ok", True), gold.reason
    assert (empty.status, empty.resolved) == ("ok", False)


def _run(outcomes: dict[str, str], status: str = "ok") -> TestRun:
    return TestRun("j", "i", status, outcomes)


def test_prove_needs_the_same_failures_twice_and_some_failure():
    (inst,) = list(read_instances("demo", 1))
    cand = BugCandidate(inst, ())
    base = {"a", "b", "c"}
    fails_a = {"a": "failed", "b": "passed", "c": "passed"}
    assert prove(cand, base, [_run(fails_a), _run(fails_a)]) == ("kept", {"a"}, "")
    assert prove(cand, base, [_run(fails_a), _run({"a": "failed", "b": "failed", "c": "passed"})])[0] == "flaky"
    all_pass = dict.fromkeys(base, "passed")
    assert prove(cand, base, [_run(all_pass), _run(all_pass)])[0] == "no_test_fails"
    assert prove(cand, base, [_run({}, "timeout"), _run(fails_a)])[0] == "run_failed"


class FakePool:
    """Tests pass unless the job's patch holds one of `breaks`."""

    def __init__(self, tests: list[str], breaks: dict[str, str]) -> None:
        self.tests, self.breaks, self.asked = tests, breaks, []

    def run(self, jobs, what=""):
        self.asked.append((what, len(jobs)))
        out = []
        for job in jobs:
            failing = {t for marker, t in self.breaks.items() if marker in job.patch}
            out.append(
                TestRun(
                    job.job_id,
                    job.instance.instance_id,
                    "ok",
                    {t: "failed" if t in failing else "passed" for t in self.tests},
                )
            )
        return out


def test_a_file_of_a_bug_that_does_not_matter_is_caught_and_a_git_snapshot_is_counted(monkeypatch):
    (inst,) = list(read_instances("demo", 1))
    code = {"pkg/a.py": "x = 1 + 2\n", "pkg/b.py": "y = 3 - 4\n"}
    inst = replace(inst, code_context=code, oracle_new_content={}, patch="", test_patch=inst.test_patch)
    bug = (
        Mutation("pkg/a.py", "binop", 1, 6, 7, "+", "-"),
        Mutation("pkg/b.py", "binop", 1, 6, 7, "-", "+"),
    )
    from data.bugs import proof  # the runs' module; its draw is replaced here

    monkeypatch.setattr(proof, "candidates", lambda *a, **k: [BugCandidate(inst, bug)])
    pool = FakePool(["t1", "t2"], {"+x = 1 - 2": "t1"})  # only a.py's change breaks a test
    (outcome,) = inject([inst], pool, per_instance=1, combine=2)
    assert (outcome.reason, outcome.detail) == ("file_does_not_matter", "pkg/b.py")
    pool = FakePool(["t1", "t2"], {"+x = 1 - 2": "t1", "+y = 3 + 4": "t2"})
    (outcome,) = inject([inst], pool, per_instance=1, combine=2)
    assert outcome.reason == "kept" and outcome.instance is not None
    assert outcome.instance.fail_to_pass == ("t1", "t2") and outcome.instance.oracle_new_content == code
    git = replace(inst, environment=json.dumps({"snapshot": "git"}))
    assert [o.reason for o in inject([git], pool)] == ["git_snapshot"]


def test_a_baseline_in_the_cache_is_not_run_again_and_a_failed_one_is():
    (inst,) = list(read_instances("demo", 1))
    inst = replace(inst, code_context={"pkg/a.py": "x = 1 + 2\n"}, oracle_new_content={}, patch="")
    cache: dict = {}
    pool = FakePool(["t1", "t2"], {"+x = 1 - 2": "t1"})
    first = inject([inst], pool, per_instance=1, baseline_cache=cache)
    again = inject([inst], pool, per_instance=1, baseline_cache=cache)
    assert [o.reason for o in first] == [o.reason for o in again] == ["kept"]
    # No second baseline: the cache holds the confirmed one (CONFIRM runs), so only the bug runs again.
    assert pool.asked == [
        *[("baseline runs", 2), ("bug runs", 2), ("confirming runs", 6)],
        *[("bug runs", 2), ("confirming runs", 3)],
    ]
    assert [b.passing for b in cache.values()] == [frozenset({"t1", "t2"})]
    changed = replace(inst, code_context={"pkg/a.py": "x = 1 + 3\n"})  # other code: another baseline
    inject([changed], pool, per_instance=1, baseline_cache=cache)
    assert pool.asked[-2][0] == "baseline runs" and len(cache) == 2
    broken = FakePool([], {})  # no test runs: the baseline fails, and is not kept
    other = replace(inst, instance_id="other")
    assert [o.reason for o in inject([other], broken, baseline_cache=cache)] == ["baseline_failed"]
    assert len(cache) == 2


class LoadedPool(FakePool):
    """FakePool whose baseline runs take `seconds` and whose first run of each bug job id runs
    out of its wall (the machine's load); records every job's wall under a 30 s configuration."""

    def __init__(self, tests: list[str], breaks: dict[str, str], seconds: float) -> None:
        super().__init__(tests, breaks)
        self.seconds, self.walls, self.timed_out = seconds, [], set()

    def run(self, jobs, what=""):
        out = []
        for job, run in zip(jobs, super().run(jobs, what), strict=True):
            wall = job.wall(30.0)
            self.walls.append((what, job.job_id, wall))
            if "/bug/" in job.job_id and job.job_id not in self.timed_out:
                self.timed_out.add(job.job_id)
                out.append(TestRun(job.job_id, run.instance_id, "timeout", reason="timeout", wall_s=wall))
            else:
                out.append(replace(run, seconds=self.seconds if "/base/" in job.job_id else 1.0, wall_s=wall))
        return out


def test_the_walls_of_the_proofs_follow_the_baseline_and_a_timeout_is_retried_doubled():
    (inst,) = list(read_instances("demo", 1))
    inst = replace(inst, code_context={"pkg/a.py": "x = 1 + 2\n"}, oracle_new_content={}, patch="")
    pool = LoadedPool(["t1", "t2"], {"+x = 1 - 2": "t1"}, seconds=17.0)
    (outcome,) = inject([inst], pool, per_instance=1)
    assert outcome.reason == "kept"  # the bug runs that ran out of their wall proved it on the retry
    by_stage = {}
    for what, job_id, wall in pool.walls:
        by_stage.setdefault(what, []).append((job_id, wall))
    # Nothing measured yet: the configured wall; then 4x the baseline's 17 s; the retry twice that.
    assert by_stage["baseline runs"] == [("0/base/0", 30.0), ("0/base/1", 30.0)]
    assert by_stage["bug runs"] == [("0/bug/0", 68.0), ("0/bug/1", 68.0), ("0/bug/0", 136.0), ("0/bug/1", 136.0)]
    assert {wall for _, wall in by_stage["confirming runs"]} == {68.0}


def test_bad_switches_are_refused_in_one_line(tmp_path, capsys):
    from data.inject.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(["--data", "demo", "--out", str(tmp_path / "o"), "--operators", "nope"])
    assert stop.value.code == 2 and "--operators: unknown nope; known: binop" in capsys.readouterr().err


class ScriptedSampler:
    """The model injector's answers, written out: one list per source."""

    def __init__(self, answers: list[str]) -> None:
        self.answers, self.asked = answers, []

    def sample(self, ids, messages, n, temperature):
        self.asked.append((ids, messages, n, temperature))
        return [self.answers[:n] for _ in ids]


def _edit(path: str, search: str, replace_with: str) -> str:
    block = f"```python\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace_with}\n>>>>>>> REPLACE\n```"
    return f"<think>break it</think> <solution>{block}</solution>"


def test_the_model_injector_reads_answers_by_the_rewards_rules_and_proves_them_as_rules_bugs():
    from data.bugs.proof import model_draw  # the draw that reads answers with the reward's parser

    (inst,) = list(read_instances("demo", 1))
    code = {"pkg/a.py": "def f(x):\n    return x + 1\n"}
    inst = replace(inst, code_context=code, oracle_new_content={}, patch="")
    answers = [
        _edit("pkg/a.py", "    return x + 1", "    return x - 1"),  # a bug the tests catch
        _edit("pkg/a.py", "    return x + 1", "    return x + 1"),  # changes nothing (the reward refuses it)
        _edit("tests/test_a.py", "", "def test_x():\n    pass"),  # a test file
        _edit("pkg/a.py", "    return x * 7", "    return x"),  # its SEARCH is not in the file
        "no answer format at all",
    ]
    sampler = ScriptedSampler(answers)
    pool = FakePool(["t1", "t2"], {"+    return x - 1": "t1"})  # the bug's line breaks t1
    outcomes = inject([inst], pool, per_instance=5, draw=model_draw(sampler, 5, 0.7, seed=3))
    reasons = sorted(o.reason for o in outcomes)
    assert reasons == ["edit_failed", "edit_failed", "edits_outside_code", "kept", "malformed"]
    ((ids, messages, n, temperature),) = sampler.asked
    assert ids == [inst.instance_id] and (n, temperature) == (5, 0.7)
    assert "pkg/a.py" in messages[0][1]["content"] and "test" not in messages[0][1]["content"].split("Introduce")[0]
    (kept,) = [o.instance for o in outcomes if o.reason == "kept"]
    assert kept.problem_source == "injected:model" and kept.fail_to_pass == ("t1",)
    assert kept.code_context["pkg/a.py"] == "def f(x):\n    return x - 1\n" and kept.oracle_new_content == code


def test_injector_model_starts_one_engine_and_counts_every_answer(tmp_path, monkeypatch):
    from data.inject import __main__ as command  # its engine is replaced: vLLM stays out of this process

    started = []

    class Engine(ScriptedSampler):
        def close(self):
            started.append("closed")

    def engine(model, cfg, on_ray):
        started.append((model, cfg.rollout.max_new_tokens, cfg.seed, on_ray))
        return Engine(["not an answer"] * 8)

    monkeypatch.setattr(command, "_engine", engine)
    out = tmp_path / "out"
    args = ["--data", "demo", "--out", str(out), "--limit", "1", "--injector", "model", "model.name=tiny"]
    args += ["--per-instance", "3", "rollout.max_new_tokens=32", "--seed", "5", "reward.execution.num_runners=0"]
    args += ["reward.execution.wall_s=10", f"reward.execution.cache_dir={tmp_path / 'cache'}", "--issue-model", "tiny"]
    assert main(args) == 0
    assert started == [("tiny", 32, 5, False), "closed"]  # the same model writes the reports: one engine
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["injector"] == "model" and manifest["candidates"] == 3
    assert manifest["counts"] == {"malformed": 3} and manifest["kept"] == 0 and manifest["issues"] == {}


class ReportSampler(ScriptedSampler):
    """One answer per kept instance, in order (the issue model's)."""

    def sample(self, ids, messages, n, temperature):
        self.asked.append((ids, messages, n, temperature))
        return [[self.answers[i % len(self.answers)]] for i in range(len(ids))]


def test_a_model_report_is_the_issue_only_when_it_quotes_no_line_of_the_fix():
    from data.bugs.issues import read_report, write_reports

    (inst,) = list(read_instances("demo", 1))
    code = {"pkg/a.py": "def f(x):\n    return x - 1\n"}
    patch = "--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x - 1\n+    return x + 1\n"
    inst = replace(inst, code_context=code, oracle_new_content={"pkg/a.py": "x"}, patch=patch, problem_statement="R\n")
    good = "f gives the wrong number\n\nI expected f(1) to be 2, but it returns 0. Seen on the latest release."
    answers = [
        f"<think>the fault is the minus</think>{good}",
        good + "\nChanging it to `return   x + 1` fixes it.",  # the fix's line, spaced otherwise
        "<think>a long thought</think>broken",
    ]
    sampler = ReportSampler(answers)
    reports = write_reports([inst, inst, inst], sampler)
    assert [(r.reason, r.text) for r in reports] == [("model", good + "\n"), ("leaks_fix", "R\n"), ("unusable", "R\n")]
    assert reports[1].detail == "return x + 1" and reports[2].detail == "6 characters"
    ((ids, messages, n, temperature),) = sampler.asked
    assert (n, temperature) == (1, 0.0) and "return x - 1" in messages[0][1]["content"]  # the buggy code
    assert "R\n" in messages[0][1]["content"] and "return x + 1" not in messages[0][1]["content"]
    assert read_report("", inst).reason == "unusable"
    from data.bugs.issues import added_lines

    unary = patch.replace("+    return x + 1", "+    ++total_count")  # an added line that starts "++"
    assert added_lines(patch) == ["return x + 1"] and added_lines(unary) == ["++total_count"]
    looped = read_report("It is broken when I add a month. " * 3 + "Please help.", inst)
    assert (looped.reason, looped.detail) == ("unusable", "repeats: it is broken when i add a month")


@needs_sandbox
def test_issue_model_rewrites_the_kept_issues_with_one_engine(tmp_path, monkeypatch):
    from data.inject import __main__ as command  # its engine is replaced: vLLM stays out of this process

    started = []
    report = "Adding two numbers gives a wrong result\n\nI expected the sum, and got something else instead."

    class Engine(ReportSampler):
        def close(self):
            started.append("closed")

    def engine(model, cfg, on_ray):
        started.append(model)
        return Engine([report])

    monkeypatch.setattr(command, "_engine", engine)
    out = tmp_path / "out"
    args = ["--data", "demo", "--out", str(out), "--limit", "1", "--per-instance", "2", "--seed", "1", "--issue-model"]
    args += ["model.name=tiny", "reward.execution.num_runners=0", "reward.execution.wall_s=10"]
    args += [f"reward.execution.cache_dir={tmp_path / 'cache'}"]
    assert main(args) == 0
    assert started == ["tiny", "closed"]  # the rules injector needs no engine; the reports one
    manifest = json.loads((out / "_manifest.json").read_text())
    kept = list(read_instances(str(out), 0))
    assert manifest["issue_model"] == "tiny" and manifest["issues"] == {"model": len(kept)} and kept
    assert "issues" in manifest["seconds"]
    for inst in kept:
        assert inst.problem_statement == report + "\n" and inst.problem_source.endswith("/issue:model")


class ChancePool(FakePool):
    """As FakePool, but the runs named in `chance` ("bug/1", "confirm/4", "base/3": the job
    id's kind and run number) get those outcomes instead: a bug, or a test, that fails or passes
    by chance."""

    def __init__(self, tests: list[str], breaks: dict[str, str], chance: dict[str, dict[str, str]]) -> None:
        super().__init__(tests, breaks)
        self.chance = chance

    def run(self, jobs, what=""):
        out = super().run(jobs, what)
        for job, run in zip(jobs, out, strict=True):
            run.outcomes.update(self.chance.get("/".join(job.job_id.split("/")[1:]), {}))
        return out


def _one_bug(monkeypatch):
    (inst,) = list(read_instances("demo", 1))
    inst = replace(inst, code_context={"pkg/a.py": "x = 1 + 2\n"}, oracle_new_content={}, patch="")
    from data.bugs import proof  # the runs' module; its draw is replaced here

    bug = (Mutation("pkg/a.py", "binop", 1, 6, 7, "+", "-"),)
    monkeypatch.setattr(proof, "candidates", lambda *a, **k: [BugCandidate(inst, bug)])
    return inst


def test_a_bug_that_fails_only_by_chance_is_refused_as_flaky(monkeypatch):
    from data.bugs.proof import CONFIRM, SCREEN

    inst = _one_bug(monkeypatch)
    steady = ChancePool(["t1", "t2"], {"+x = 1 - 2": "t1"}, {})
    (outcome,) = inject([inst], steady, per_instance=1)
    assert outcome.reason == "kept" and outcome.instance is not None and outcome.instance.fail_to_pass == ("t1",)
    # The screen's runs, then CONFIRM in all of the bug's and of the working code's.
    assert steady.asked[-1] == ("confirming runs", 2 * (CONFIRM - SCREEN))
    passes_once = {f"confirm/{CONFIRM - 1}": {"t1": "passed"}}  # the bug's last run: the test passes
    (outcome,) = inject([inst], ChancePool(["t1", "t2"], {"+x = 1 - 2": "t1"}, passes_once), per_instance=1)
    assert (outcome.reason, outcome.detail) == ("flaky", f"1 of {CONFIRM} runs fail other tests than the first")
    # The working code failing that test once in the longer baseline: its failure proves nothing.
    shaky = {f"base/{CONFIRM - 1}": {"t1": "failed"}}
    (outcome,) = inject([inst], ChancePool(["t1", "t2"], {"+x = 1 - 2": "t1"}, shaky), per_instance=1)
    assert outcome.reason == "flaky" and "baseline" in outcome.detail


class RandomPool(FakePool):
    """The red team's flaky bug: in each process (each run) the bug fails its test only when
    `random() < p`, drawn from a seeded generator."""

    def __init__(self, tests: list[str], breaks: dict[str, str], p: float, seed: int) -> None:
        super().__init__(tests, breaks)
        self.p, self.draw = p, random.Random(seed)

    def run(self, jobs, what=""):
        out = super().run(jobs, what)
        for run in out:
            if "failed" in run.outcomes.values() and self.draw.random() >= self.p:
                run.outcomes.update(dict.fromkeys(run.outcomes, "passed"))  # this process drew no bug
        return out


def test_a_bug_failing_with_probability_0_7_per_process_is_rarely_kept(monkeypatch):
    """Two screen runs would keep it about half the time (0.7^2); all CONFIRM runs alike, 0.7^5."""
    inst = _one_bug(monkeypatch)
    pool = RandomPool(["t1", "t2"], {"+x = 1 - 2": "t1"}, 0.7, seed=7)
    kept = sum(inject([inst], pool, per_instance=1)[0].reason == "kept" for _ in range(60))
    assert 0 < kept <= 60 * 0.3, kept  # 0.7^5 = 0.17 expected; 0.49 with the screen alone
