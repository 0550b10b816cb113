"""Agent episodes on an engine (actors/agent/rollout.py), with a scripted stand-in for a
continuously batching engine and real sandbox sessions on a demo instance: episodes in flight
together, a slow command holding up no other episode's generation, a turn joining the engine
while another is being generated, and the tokens the learner will train on."""

from __future__ import annotations

import time

import pytest

from actors.agent.rollout import EpisodeSpec, Sample, TurnRequest, TurnServer, run_agent_episodes
from conf.config import AgentConfig, ExecutionConfig
from data.loader import read_instances
from learner.models import build_tiny_tokenizer
from reward.execution import sandbox
from reward.execution.runner import Runner
from tests.actors.test_replay import FIX  # the demo instance's exact fix, as an edit turn

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")

SCRIPTS = {
    "slow": ["```bash\nsleep 3; echo slept\n```", FIX, "```submit\n```"],
    "quick": ["```bash\nls calspan\n```", "```bash\necho two\n```", FIX, "```submit\n```"],
    "deep": [
        FIX,
        "```bash\npython -c \"import os\nfor _ in range(3000): os.mkdir('d'); os.chdir('d')\"\n```",
        "```submit\n```",
    ],
}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("tok")
    build_tiny_tokenizer(out)
    return AutoTokenizer.from_pretrained(out)


class ScriptedEngine:
    """Answers each request with its episode's next scripted turn (the episode is told by its
    seed, the turn by how many assistant turns its prompt holds), stopped at the eos; like a
    decoding engine, one token of every request in it per step (`step_s` each)."""

    def __init__(self, tokenizer, seeds: dict[int, str], step_s: float = 0.0) -> None:
        self.tokenizer, self.seeds, self.step_s, self.served = tokenizer, seeds, step_s, []
        self.opening = tokenizer.encode("<|im_start|>assistant", add_special_tokens=False)
        self.running: dict[int, list] = {}  # key -> [name, turn, ids, tokens generated]

    def add(self, key: int, r: TurnRequest) -> None:
        turn = sum(r.prompt_ids[i : i + len(self.opening)] == self.opening for i in range(len(r.prompt_ids))) - 1
        name = self.seeds[r.seed - turn]
        ids = self.tokenizer.encode(SCRIPTS[name][turn], add_special_tokens=False) + [self.tokenizer.eos_token_id]
        self.running[key] = [name, turn, ids, 0]

    def step(self) -> list[tuple[int, Sample]]:
        time.sleep(self.step_s)
        done = []
        for key, item in list(self.running.items()):
            item[3] += 1
            name, turn, ids, generated = item
            if generated == len(ids):
                del self.running[key]
                self.served.append((name, turn, time.monotonic()))
                done.append((key, Sample(ids, [-0.1] * len(ids), SCRIPTS[name][turn], "stop", policy_version=7)))
        return done


def test_episodes_in_flight_share_the_engine_and_keep_its_tokens(tokenizer, tmp_path):
    runner = Runner(ExecutionConfig(cache_dir=str(tmp_path)))
    instance = next(i for i in read_instances("demo", 0) if i.instance_id == "demo__calspan-3")
    engine = ScriptedEngine(tokenizer, {100: "slow", 200: "quick"}, step_s=0.002)
    server = TurnServer(engine)
    specs = [EpisodeSpec("0/0/x", 0, instance, 100), EpisodeSpec("0/0/x", 1, instance, 200)]
    start = time.monotonic()
    slow, quick = run_agent_episodes(
        specs, server, runner.session, tokenizer, AgentConfig(), max_new_tokens=512, max_model_len=4096
    )
    for episode, name in ((slow, "slow"), (quick, "quick")):
        assert episode.infra_error is None and episode.ended_by == "submit"
        assert episode.patch == instance.patch  # both fixed it
        sampled = [t for t, m in zip(episode.tokens.completion_ids, episode.tokens.loss_mask, strict=True) if m]
        expected = [tokenizer.encode(t, add_special_tokens=False) + [tokenizer.eos_token_id] for t in SCRIPTS[name]]
        assert sampled == [i for ids in expected for i in ids]  # exactly the engine's ids, masked 1
        assert episode.tokens.versions == [7] * len(SCRIPTS[name])
    assert "slept" in slow.episode["turns"][0]["observation"]
    # While the slow episode's command ran, the quick one's next turns were served.
    served = {(name, turn): at - start for name, turn, at in engine.served}
    assert served[("quick", 2)] < served[("slow", 1)] and served[("slow", 1)] >= 3.0
    assert server.stats.requests == 7 and engine.running == {}
    assert 0.0 < server.stats.busy_fraction < 1.0  # idle while the slow command ran alone


def test_a_session_that_cannot_start_is_an_infrastructure_failure(tokenizer, tmp_path):
    runner = Runner(ExecutionConfig(cache_dir=str(tmp_path)))
    instance = next(i for i in read_instances("demo", 0) if i.instance_id == "demo__calspan-3")
    broken = instance.__class__(**{**instance.__dict__, "environment": '{"python": "2.1"}'})
    server = TurnServer(ScriptedEngine(tokenizer, {5: "quick"}))
    (episode,) = run_agent_episodes(
        [EpisodeSpec("0/0/y", 0, broken, 5)],
        server,
        runner.session,
        tokenizer,
        AgentConfig(),
        max_new_tokens=64,
        max_model_len=4096,
    )
    assert episode.infra_error and "2.1" in episode.infra_error and episode.ended_by == "infra"
    assert server.stats.requests == 0 and server.stats.steps == 0  # no turn was generated for it


def test_a_tree_past_a_session_limit_is_the_policys_not_the_infrastructures(tokenizer, tmp_path):
    """3000 nested folders after the fix: the walk of the changes stops at its depth budget and
    the episode ends as that limit, with no patch (scored as no change), not as `infra`."""
    runner = Runner(ExecutionConfig(cache_dir=str(tmp_path)))
    instance = next(i for i in read_instances("demo", 0) if i.instance_id == "demo__calspan-3")
    server = TurnServer(ScriptedEngine(tokenizer, {9: "deep"}))
    (episode,) = run_agent_episodes(
        [EpisodeSpec("0/0/z", 0, instance, 9)],
        server,
        runner.session,
        tokenizer,
        AgentConfig(),
        max_new_tokens=512,
        max_model_len=4096,
    )
    assert (episode.infra_error, episode.ended_by, episode.patch) == (None, "limit_depth", "")
    assert "nested over 128 deep" in episode.episode["limit"] and len(episode.episode["turns"]) == 3
