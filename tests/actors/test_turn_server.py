"""The TurnServer (actors/agent/rollout.py) on a stand-in for a continuously batching engine:
a turn that arrives while another is being generated joins the engine at its next step and
leaves it when its own answer is done, not when the batch drains; a request the engine refuses
fails only the episode that asked; an engine that fails fails every episode in it."""

from __future__ import annotations

import threading
import time

import pytest

from actors.agent.rollout import Sample, TurnRequest, TurnServer


class CountingEngine:
    """A request of max_tokens=k finishes k steps after it was added; each step takes `step_s`
    (with `fail_with`, a step with that many requests in it raises instead). Records the step at which each request (told by its seed) was added and finished."""

    def __init__(self, step_s: float = 0.002, refuse_over: int = 10_000, fail_with: int | None = None) -> None:
        self.step_s, self.refuse_over, self.fail_with = step_s, refuse_over, fail_with
        self.steps = 0
        self.running: dict[int, list[int]] = {}  # key -> [seed, steps left]
        self.added: dict[int, int] = {}  # seed -> step count when added
        self.finished: dict[int, int] = {}  # seed -> step count when done
        self.in_step: list[int] = []  # requests in the engine at each step

    def add(self, key: int, request: TurnRequest) -> None:
        if len(request.prompt_ids) > self.refuse_over:
            raise ValueError(f"prompt of {len(request.prompt_ids)} tokens is over the model's length")
        self.running[key] = [request.seed, request.max_tokens]
        self.added[request.seed] = self.steps

    def step(self) -> list[tuple[int, Sample]]:
        self.steps += 1
        if self.fail_with is not None and len(self.running) >= self.fail_with:
            raise RuntimeError("the engine died")
        time.sleep(self.step_s)
        self.in_step.append(len(self.running))
        done = []
        for key, item in list(self.running.items()):
            item[1] -= 1
            if item[1] == 0:
                del self.running[key]
                self.finished[item[0]] = self.steps
                done.append((key, Sample([item[0]], [-0.5], f"answer {item[0]}", "stop", policy_version=3)))
        return done


def test_a_turn_joins_the_engine_while_another_is_generated():
    # Steps of 10 ms: the engine's time dominates the server's own between steps, however
    # loaded the machine is, so the busy fraction below says what it measures.
    engine = CountingEngine(step_s=0.01)
    server = TurnServer(engine)
    seen: dict[str, float] = {}

    def long_turn() -> str:  # 100 steps: at least 1 s
        answer = server.ask(TurnRequest([1, 2, 3], max_tokens=100, seed=1))
        seen["long"] = time.monotonic()
        return answer.text

    def command_then_short_turn() -> str:  # a 0.2 s command, then a 5-step turn
        time.sleep(0.2)
        answer = server.ask(TurnRequest([4, 5], max_tokens=5, seed=2))
        seen["short"] = time.monotonic()
        return answer.text

    assert server.run([long_turn, command_then_short_turn]) == ["answer 1", "answer 2"]
    # The short turn was added mid-way through the long one and done 5 steps later; a server
    # that waited for the batch to drain would have added it after step 100.
    assert 0 < engine.added[2] < engine.finished[1] and engine.finished[2] == engine.added[2] + 5
    assert seen["short"] < seen["long"]
    assert max(engine.in_step) == 2 and server.stats.steps == 100 and server.stats.requests == 2
    assert 1.0 < server.stats.mean_batch < 1.1  # 2 requests in 5 of the 100 steps
    assert 0.5 < server.stats.busy_fraction <= 1.0  # idle only before the first request arrived


def test_a_refused_request_fails_its_own_episode_only():
    engine = CountingEngine(refuse_over=10)
    server = TurnServer(engine)
    results = server.run(
        [
            lambda: server.ask(TurnRequest(list(range(50)), max_tokens=4, seed=1)),
            lambda: server.ask(TurnRequest([1], max_tokens=4, seed=2)).text,
        ]
    )
    assert isinstance(results[0], ValueError) and "over the model's length" in str(results[0])
    assert results[1] == "answer 2" and engine.finished == {2: 4} and server.stats.requests == 1


def test_an_engine_failure_reaches_every_episode_in_it():
    server = TurnServer(CountingEngine(fail_with=2))
    barrier = threading.Barrier(2)

    def turn(seed: int):  # neither finishes before the other joins (10,000 steps)
        barrier.wait()
        return server.ask(TurnRequest([seed], max_tokens=10_000, seed=seed))

    results = server.run([lambda: turn(1), lambda: turn(2)])
    assert all(isinstance(r, RuntimeError) and "died" in str(r) for r in results)


def test_episodes_that_ask_nothing_end_the_run_without_a_step():
    engine = CountingEngine()
    server = TurnServer(engine)
    assert server.run([lambda: 1, lambda: 2]) == [1, 2]
    assert engine.steps == 0 and server.stats.busy_fraction == 0.0


@pytest.mark.parametrize("episodes", [1, 8])
def test_every_request_is_answered_once(episodes):
    engine = CountingEngine(step_s=0.0)
    server = TurnServer(engine)

    def several(i: int) -> list[str]:
        return [server.ask(TurnRequest([i], max_tokens=1 + (i + k) % 4, seed=100 * i + k)).text for k in range(5)]

    results = server.run([lambda i=i: several(i) for i in range(episodes)])
    assert results == [[f"answer {100 * i + k}" for k in range(5)] for i in range(episodes)]
    assert server.stats.requests == 5 * episodes and engine.running == {}
