"""The reward pool: input order, one object-store copy per instance, dead and stuck workers replaced."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
import ray

from actors.driver.reward_pool import RewardPool, RewardWorker, ScoredJob, ScoreJob
from conf.config import RewardConfig
from data.schema import Instance
from reward import oracle_answer, score_output
from reward.kinds import Similarity
from tests.reward.degenerate import (
    DEGENERATE_CONTEXT,
    DEGENERATE_ORACLE,
    ESTIMATE_CONTEXT,
    ESTIMATE_ORACLE,
    block,
    degenerate_answer,
    estimate_defeating_answer,
)


def RewardInstance(code_context: dict, oracle_new_content: dict) -> Instance:
    """An instance with just the files the similarity reward reads."""
    return Instance("t", "o/r", "c", "bug", "", None, code_context, oracle_new_content)


INSTANCES = {
    "one": RewardInstance({"a.py": "x = 1\ny = 2\n"}, {"a.py": "x = 1\ny = 3\n"}),
    "two": RewardInstance({"b.py": "def f():\n    pass\n"}, {"b.py": "def f():\n    return 0\n", "c.py": "C = 1\n"}),
}
OUTPUTS = {
    iid: [
        oracle_answer(inst.code_context, inst.oracle_new_content),
        "no tags at all",
        "<think>t</think><solution>```\n### a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 5\n>>>>>>> REPLACE\n```</solution>",
    ]
    for iid, inst in INSTANCES.items()
}


def make_jobs(count: int) -> list[ScoreJob]:
    rng = random.Random(count)
    jobs = []
    for i in range(count):
        iid = rng.choice(sorted(INSTANCES))
        jobs.append(ScoreJob(f"r{i}", iid, rng.choice(OUTPUTS[iid])))
    return jobs


def expected(jobs: list[ScoreJob]) -> list[ScoredJob]:
    return [
        ScoredJob(
            job.rollout_id,
            score_output(
                INSTANCES[job.instance_id].code_context,
                INSTANCES[job.instance_id].oracle_new_content,
                job.output,
                max_pair_seconds=10.0,
            ),
        )
        for job in jobs
    ]


def test_worker_without_ray_scores_in_order_and_never_raises() -> None:
    jobs = make_jobs(12)
    similarity = Similarity(RewardConfig(max_pair_seconds=10.0))
    assert RewardWorker(similarity).score(jobs, INSTANCES) == expected(jobs)
    broken = {"one": RewardInstance(None, {"a.py": "x"})}  # type: ignore[arg-type]
    (scored,) = RewardWorker(similarity).score([ScoreJob("r", "one", "x")], broken)
    assert scored.result.reward == 0.0 and scored.result.error.startswith("internal error")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every Ray socket on 127.0.0.1
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


CFG = RewardConfig(num_workers=2, num_cpus=0.25, batch_size=4, max_pair_seconds=10.0, call_timeout_s=120.0)


@pytest.mark.slow
def test_pool_results_in_input_order_with_instances_put_once(local_ray: None, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = RewardPool(CFG)
    try:
        puts = []
        real_put = ray.put
        monkeypatch.setattr(ray, "put", lambda value, **kw: puts.append(value) or real_put(value, **kw))
        jobs = make_jobs(61)  # not a multiple of the batch size
        assert pool.score(jobs, INSTANCES) == expected(jobs)
        assert sorted(id(p) for p in puts) == sorted(id(INSTANCES[k]) for k in {j.instance_id for j in jobs})
        assert pool.score([], INSTANCES) == []
        with pytest.raises(KeyError, match="nope"):
            pool.score([ScoreJob("r", "nope", "x")], INSTANCES)
        assert pool.stats() == {"reward_timeouts": 0, "reward_actor_restarts": 0, "reward_lost_jobs": 0}
    finally:
        pool.shutdown()


def slow_instance(chars: int) -> tuple[RewardInstance, str]:
    """A pair whose similarity takes seconds (two long random lines over a two-letter alphabet)."""
    rng = random.Random(0)
    line = "".join(rng.choice("ab") for _ in range(chars))
    other = "".join(rng.choice("ab") for _ in range(chars))
    instance = RewardInstance({"s.py": ""}, {"s.py": line + "\n"})
    output = (
        f"<think>t</think><solution>```\n### s.py\n<<<<<<< SEARCH\n\n=======\n{other}\n>>>>>>> REPLACE\n```</solution>"
    )
    return instance, output


@pytest.mark.slow
def test_killed_worker_is_replaced_and_its_batch_redone(local_ray: None) -> None:
    instance, slow_output = slow_instance(12_000)  # about a second per job here
    instances = dict(INSTANCES, slow=instance)
    pool = RewardPool(replace(CFG, batch_size=1))
    try:
        before = pool.worker_pids()
        jobs = [ScoreJob(f"s{i}", "slow", slow_output) for i in range(4)] + make_jobs(6)
        killer = threading.Timer(1.0, lambda: ray.kill(pool.workers[0], no_restart=True))
        killer.start()
        started = time.monotonic()
        scored = pool.score(jobs, instances)
        killer.join()
        assert time.monotonic() - started < 60
        want = [
            ScoredJob(
                j.rollout_id,
                score_output(
                    instances[j.instance_id].code_context, instances[j.instance_id].oracle_new_content, j.output
                ),
            )
            for j in jobs
        ]
        assert scored == want
        assert pool.stats()["reward_actor_restarts"] == 1
        assert pool.stats()["reward_lost_jobs"] == 0
        after = pool.worker_pids()
        assert after[0] != before[0] and after[1] == before[1]
    finally:
        pool.shutdown()


@pytest.mark.slow
def test_stuck_job_is_isolated_and_given_up(local_ray: None) -> None:
    instance, stuck_output = slow_instance(40_000)  # ~10 s: far over the call timeout below
    instances = dict(INSTANCES, stuck=instance)
    pool = RewardPool(replace(CFG, batch_size=3, call_timeout_s=1.5, max_pair_seconds=1e9))
    try:
        jobs = make_jobs(2) + [ScoreJob("stuck", "stuck", stuck_output)] + make_jobs(5)
        scored = pool.score(jobs, instances)
        assert [s.rollout_id for s in scored] == [j.rollout_id for j in jobs]
        lost = scored[2].result
        assert (lost.reward, lost.error) == (0.0, "lost: the reward call exceeded 1.5 s, twice")
        others = [s for s in scored if s.rollout_id != "stuck"]
        assert others == [s for s in expected([j for j in jobs if j.rollout_id != "stuck"])]
        stats = pool.stats()
        assert stats["reward_lost_jobs"] == 1 and stats["reward_actor_restarts"] == 3
    finally:
        pool.shutdown()


def degenerate_jobs() -> tuple[list[ScoreJob], dict[str, RewardInstance]]:
    """16 hostile answers: two that defeat the pair estimate (the CPU budget must stop them), two
    that rewrite 56 million characters over and over (the work cap), and cheap ones around them."""
    a_block = lambda s, r, path="a.py": block(path, s, r)  # noqa: E731
    wrap = "<think>t</think><solution>{}</solution>".format
    outputs = [
        ("deg", wrap("```python\n### a.py\n<<<<<<< SEARCH\nx = 1\n" * 20_000)),  # unterminated blocks
        ("est", estimate_defeating_answer(40_000)),
        ("deg", wrap(a_block("", "\n") * 40)),  # exponential growth: the size guard
        ("deg", degenerate_answer(rewrites=300)),
        ("deg", wrap(a_block("    return 1", "    return 1"))),
        ("deg", wrap(a_block("x", "y", path="../x"))),
        ("deg", degenerate_answer(rewrites=40, char="\u0101")),
        ("deg", wrap((a_block("def f():", "def f(): ") + a_block("def f(): ", "def f():")) * 1_000)),
        ("est", estimate_defeating_answer(40_000)),
        ("deg", wrap(a_block("    return 9", "    return 2"))),
        ("deg", wrap("A" * 1_000_000)),
        ("deg", "<think>t</think><think>t</think><solution></solution>"),
        ("deg", wrap(a_block("def f():", "def f():\n    pass") * 3_000)),
        (
            "deg",
            wrap(
                a_block("    return 1", "    return 2")
                + (a_block("    return 2", "    return 3") + a_block("    return 3", "    return 2")) * 1_000
            ),
        ),
        ("deg", "<think> </think><solution>" + a_block("x", "y") + "</solution>"),
        ("deg", wrap(a_block("    return 1", "    return 2") * 2)),
    ]
    instances = {"deg": RewardInstance(DEGENERATE_CONTEXT, DEGENERATE_ORACLE),
                 "est": RewardInstance(ESTIMATE_CONTEXT, ESTIMATE_ORACLE)}  # fmt: skip
    return [ScoreJob(f"d{i}", iid, output) for i, (iid, output) in enumerate(outputs)], instances


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_an_unbounded_batch_of_16_degenerate_answers_is_scored_and_the_step_goes_on(local_ray: None) -> None:
    # A CPU budget of 1.0 x 4 = 4 s per answer (killed before 5 s of CPU): above what the work
    # cap lets an answer spend (about 3 s here), below the estimate-defeating answers' ~20 s,
    # whose estimate (0.86 s) passes the pair cap. No wall clock can end a call (600 s).
    cfg = replace(CFG, batch_size=16, max_pair_seconds=1.0, answer_cpu_factor=4.0, call_timeout_s=600.0)
    jobs, instances = degenerate_jobs()
    pool = RewardPool(cfg)
    try:
        scored = pool.score(jobs, instances)
        assert [s.rollout_id for s in scored] == [j.rollout_id for j in jobs]
        results = {s.rollout_id: s.result for s in scored}
        for job in jobs:
            got = results[job.rollout_id]
            if job.instance_id == "est":  # given up after two kills in its batch and one alone
                assert (got.reward, got.error) == (
                    0.0,
                    "lost: the reward worker died (ActorDiedError; over the CPU budget of 4 s per answer, "
                    "or killed), twice",
                )
            elif job.rollout_id in ("d3", "d6"):  # the work cap, decided from sizes
                assert (got.reward, got.format_ok) == (-1.0, True)
                assert got.error.startswith("work: edit 25 of a.py would bring")
            else:  # scored as the scorer scores it in this process
                assert got == score_output(DEGENERATE_CONTEXT, DEGENERATE_ORACLE, job.output, max_pair_seconds=1.0)
        assert results["d2"].error == "too large: a.py"
        # The batch killed twice, then each estimate-defeating answer once alone: nothing else.
        stats = pool.stats()
        assert (stats["reward_lost_jobs"], stats["reward_actor_restarts"]) == (2, 4)
        # The step goes on: the same workers score ordinary rollouts.
        ordinary = make_jobs(8)
        assert pool.score(ordinary, INSTANCES) == expected(ordinary)
    finally:
        pool.shutdown()
