"""Agent episodes on an engine: many episodes in flight, each turn one generation request.

Each episode runs `run_episode` (episode.py) in a thread of its own against its sandbox session
(reward/execution/workspace.py) with an `EnginePolicy`: a turn is a request to the `TurnServer`,
which drives a continuously batching engine (`TurnEngine`) from the caller's thread. A request
joins the engine at its next step, whatever else is being generated, and leaves it the step its
answer is complete: an episode whose command is running is simply not in the engine, so it never
holds up another episode's generation, and its next turn never waits for a batch to drain (the
scheduling of vLLM's async engine, as SkyRL's and veRL's agent loops use it, without an event
loop: the engine's own `add_request`/`step`, which `LLM.generate` also runs on, driven here).
`busy_fraction` is the share of the wall time the engine was stepping: what is left is the time
every live episode was in a command or between turns.

Token in, token out (tokens.py): the policy keeps the episode's ids as the engine returned and
was given them; its next request's prompt is the whole sequence so far, so vLLM's prefix cache
serves the earlier turns.

An episode whose session cannot start (SessionFailed: the snapshot, the environment, the
sandbox) or whose session dies is an infrastructure failure (`infra_error`), never scored as
the policy's: the driver leaves it out of its group's statistics. One whose actions or final
tree passed a session limit is the policy's (episode.py `final_patch`): it ends as that limit,
with no patch, and is trained on.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from actors.agent.episode import Message, NoMoreTurns, final_patch, run_episode, task_messages
from actors.agent.tokens import EpisodeTokens, Template, observation_ids
from conf.config import AgentConfig
from data.prompt import encode_prompt
from data.schema import Instance
from reward.execution.workspace import Session, SessionFailed


@dataclass(frozen=True)
class TurnRequest:
    prompt_ids: list[int]
    max_tokens: int
    seed: int
    temperature: float | None = None  # None: the engine's rollout.temperature; 0: greedy (evaluation)


@dataclass(frozen=True)
class Sample:
    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str
    policy_version: int


class TurnEngine(Protocol):
    """A continuously batching engine: requests join between steps, each step advances every
    request in it (vLLM: one scheduler step, a decode token for each running request and the
    prefill of new ones) and returns those it completed."""

    def add(self, key: int, request: TurnRequest) -> None:
        """Queue `request` under `key`; it runs from the next step on (raises if it is refused,
        e.g. a prompt over the model's length)."""
        ...

    def step(self) -> list[tuple[int, Sample]]:
        """One step of every queued request; the ones it finished, by key."""
        ...


@dataclass
class ServeStats:
    steps: int = 0  # engine steps taken
    requests: int = 0  # turns served
    busy_s: float = 0.0  # in the engine's steps
    wall_s: float = 0.0  # from the first episode's start to the last one's end
    running_sum: int = 0  # requests in the engine, summed over steps (mean batch: / steps)

    @property
    def busy_fraction(self) -> float:
        return self.busy_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def mean_batch(self) -> float:
        return self.running_sum / self.steps if self.steps else 0.0


class TurnServer:
    """Serves episode threads' turn requests on a continuously batching engine (module docstring)."""

    def __init__(self, engine: TurnEngine) -> None:
        self.engine = engine
        self.stats = ServeStats()
        self._cond = threading.Condition()
        self._pending: list[tuple[TurnRequest, list[Any]]] = []  # (request, [answer or exception])
        self._keys = itertools.count()

    def ask(self, request: TurnRequest) -> Sample:
        """From an episode's thread: block until the engine answered this request."""
        box: list[Any] = []
        with self._cond:
            self._pending.append((request, box))
            self._cond.notify_all()
            while not box:
                self._cond.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        answer: Sample = box[0]
        return answer

    def run(self, episodes: Sequence[Callable[[], Any]]) -> list[Any]:
        """Run each callable in a thread of its own and serve their requests here until all
        have returned; their results (or the exception one raised) in order."""
        results: list[Any] = [None] * len(episodes)
        alive = [len(episodes)]

        def body(i: int, fn: Callable[[], Any]) -> None:
            try:
                results[i] = fn()
            except BaseException as exc:  # returned to the caller, who decides
                results[i] = exc
            finally:
                with self._cond:
                    alive[0] -= 1
                    self._cond.notify_all()

        start = time.monotonic()
        threads = [threading.Thread(target=body, args=(i, fn), daemon=True) for i, fn in enumerate(episodes)]
        for t in threads:
            t.start()
        running: dict[int, list[Any]] = {}  # key -> the asking episode's box
        while True:
            with self._cond:
                while not self._pending and not running and alive[0] > 0:
                    self._cond.wait()
                if not self._pending and not running:
                    break
                arrived, self._pending = self._pending, []
            answers = [(box, refused) for request, box in arrived if (refused := self._admit(request, box, running))]
            if running:
                answers += self._step(running)
            self._deliver(answers)
        for t in threads:
            t.join()
        self.stats.wall_s += time.monotonic() - start
        return results

    def _admit(self, request: TurnRequest, box: list[Any], running: dict[int, list[Any]]) -> BaseException | None:
        """Queue a request in the engine; the engine's refusal is that request's answer."""
        key = next(self._keys)
        try:
            self.engine.add(key, request)
        except Exception as exc:  # returned to the episode that asked
            return exc
        running[key] = box
        return None

    def _step(self, running: dict[int, list[Any]]) -> list[tuple[list[Any], Any]]:
        begin = time.monotonic()
        self.stats.running_sum += len(running)
        try:
            done: list[tuple[int, Any]] = list(self.engine.step())
        except Exception as exc:  # every episode in the engine gets the engine's failure
            done = [(key, exc) for key in running]
        self.stats.busy_s += time.monotonic() - begin
        self.stats.steps += 1
        self.stats.requests += sum(not isinstance(answer, BaseException) for _, answer in done)
        return [(running.pop(key), answer) for key, answer in done]

    def _deliver(self, answers: list[tuple[list[Any], Any]]) -> None:
        if not answers:
            return
        with self._cond:
            for box, answer in answers:
                box.append(answer)
            self._cond.notify_all()


class EnginePolicy:
    """A policy whose turns the engine samples, keeping the episode's tokens (tokens.py)."""

    def __init__(
        self,
        server: TurnServer,
        tokenizer: Any,
        template: Template,
        tokens: EpisodeTokens,
        *,
        max_new_tokens: int,
        max_tokens: int,
        seed: int,
        temperature: float | None = None,
    ) -> None:
        self.server, self.tokenizer, self.template, self.tokens = server, tokenizer, template, tokens
        self.max_new_tokens, self.max_tokens, self.seed, self.temperature = (
            max_new_tokens,
            max_tokens,
            seed,
            temperature,
        )
        self._last: Sample | None = None

    def next_turn(self, messages: list[Message]) -> str:
        if self._last is not None:  # the observation of the last turn is the conversation's last message
            eos = bool(self._last.token_ids) and self._last.token_ids[-1] == self.tokenizer.eos_token_id
            self.tokens.add_appended(observation_ids(self.tokenizer, self.template, messages[-1].content, eos))
        room = self.max_tokens - len(self.tokens.context())
        if room <= 0:
            raise NoMoreTurns("max_tokens")
        turn = len(self.tokens.versions)
        limit, seed = min(self.max_new_tokens, room), (self.seed + turn) & 0x7FFFFFFF
        request = TurnRequest(self.tokens.context(), limit, seed, self.temperature)
        sample = self.server.ask(request)
        self.tokens.add_sample(sample.token_ids, sample.logprobs, sample.policy_version)
        self._last = sample
        return sample.text


@dataclass
class AgentEpisode:
    """One episode as the driver gets it back."""

    request_id: str
    index: int  # within its group
    tokens: EpisodeTokens
    episode: dict[str, Any] = field(default_factory=dict)  # Episode.to_json() without the messages
    patch: str = ""
    left_out: dict[str, str] = field(default_factory=dict)
    infra_error: str | None = None  # the session failed: not the policy's doing
    seconds: float = 0.0

    @property
    def ended_by(self) -> str:
        return str(self.episode.get("ended_by", "infra"))


@dataclass(frozen=True)
class EpisodeSpec:
    request_id: str
    index: int
    instance: Instance
    seed: int
    prompt_ids: list[int] | None = None  # the driver's (its tokenizer, the same model's); None: built here
    temperature: float | None = None  # of every turn (None: the engine's)


def run_agent_episodes(
    specs: Sequence[EpisodeSpec],
    server: TurnServer,
    open_session: Callable[[Instance], Session],
    tokenizer: Any,
    cfg: AgentConfig,
    *,
    max_new_tokens: int,
    max_model_len: int,
) -> list[AgentEpisode]:
    """Every spec's episode, in flight together; the results in the specs' order. An episode's
    context limit is `cfg.max_tokens`, or with null the engine's whole context, `max_model_len`."""
    max_tokens = cfg.max_tokens if cfg.max_tokens is not None else max_model_len
    template = Template.of(tokenizer)

    def one(spec: EpisodeSpec) -> AgentEpisode:
        prompt = spec.prompt_ids or encode_prompt(tokenizer, task_messages(cfg, spec.instance))
        tokens = EpisodeTokens(list(prompt))
        out = AgentEpisode(spec.request_id, spec.index, tokens)
        start = time.monotonic()
        try:
            with open_session(spec.instance) as session:
                policy = EnginePolicy(
                    server, tokenizer, template, tokens,
                    max_new_tokens=max_new_tokens, max_tokens=max_tokens, seed=spec.seed,
                    temperature=spec.temperature,
                )  # fmt: skip
                episode = run_episode(policy, session, spec.instance.problem_statement, cfg)
                episode, out.patch, out.left_out = final_patch(episode, session)
            out.episode = {k: v for k, v in episode.to_json().items() if k != "messages"}
        except SessionFailed as exc:
            out.infra_error = str(exc)
        out.seconds = time.monotonic() - start
        return out

    results = server.run([functools.partial(one, spec) for spec in specs])
    for result in results:
        if isinstance(result, BaseException):  # not a session's failure: the engine's or a bug
            raise result
    return list(results)
