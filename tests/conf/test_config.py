"""The config schema: composition of presets, and validation errors that name the field."""

import dataclasses
from pathlib import Path

import pytest
from hydra import compose, initialize
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError

from conf import config

CONF = Path(__file__).resolve().parents[2] / "conf"

config.register()


def _compose(*overrides: str) -> config.TrainConfig:
    with initialize(config_path="../../conf", version_base=None):
        return config.load(compose("config", overrides=list(overrides)))


def test_defaults_and_smoke_preset():
    base = _compose()  # the default job: the demo recipe (conf/recipe/demo.yaml) over the schema
    assert base.group_size == 8 and base.trainer.mode == "sync" and base.model.name == "smollm2-135m-instruct"
    assert (base.learner.sft_steps, base.trainer.probe_prompts, base.model.dtype) == (16, 3, "bfloat16")
    smoke = _compose("experiment=smoke")  # a group whose default is none: no '+' needed
    assert smoke.model.name == "tiny" and smoke.trainer.steps == 2 and smoke.learner.weight_decay == 0.0
    assert smoke.group_size == 16


def _keys_set_by(preset: str) -> set[str]:
    """The dotted keys a preset file under conf/ sets (its defaults list left out)."""

    def flat(node: object, prefix: str = "") -> set[str]:
        if not isinstance(node, dict):
            return {prefix[:-1]}
        return {k for key, value in node.items() for k in flat(value, f"{prefix}{key}.")}

    node = OmegaConf.to_container(OmegaConf.load(CONF / f"{preset}.yaml"))
    return {k for k in flat(node or {}) if k and not k.startswith("defaults")}


@pytest.mark.parametrize("preset", ["experiment/smoke", "cluster/p5_512", "cluster/gpu_node", "recipe/none"])
def test_presets_that_set_their_own_run_do_not_inherit_the_demo_recipe(preset):
    """Every key the demo recipe sets is, under these presets, the preset's own or the schema's."""
    cfg, schema = _compose(preset.replace("/", "=")), config.TrainConfig()
    inherited = _keys_set_by("recipe/demo") - _keys_set_by(preset)
    assert sorted(k for k in inherited if config.value_at(cfg, k) != config.value_at(schema, k)) == []
    assert "trainer.probe_prompts" in inherited and cfg.trainer.probe_prompts == 0


def test_clip_ranges_default_to_clip_eps_and_are_set_from_the_command_line():
    base = _compose()
    assert (base.learner.clip_eps_low, base.learner.clip_eps_high) == (None, None)
    dapo = _compose("learner.clip_eps_high=0.28")
    assert (dapo.learner.clip_eps, dapo.learner.clip_eps_low, dapo.learner.clip_eps_high) == (0.2, None, 0.28)


def test_agent_mode_passes_validation_with_the_defaults_alone():
    """`python train.py rollout.mode=agent`: an episode's context defaults to the engine's."""
    cfg = _compose("rollout.mode=agent")
    assert (cfg.agent.max_tokens, cfg.rollout.max_model_len) == (None, 4096)
    assert _compose("rollout.mode=agent", "agent.max_tokens=2048").agent.max_tokens == 2048


def test_unknown_key_is_rejected_with_its_name():
    with pytest.raises((ConfigCompositionException, ConfigKeyError), match="learner.lrr"):
        _compose("learner.lrr=1")


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(trainer=dict(mode="fast")), "trainer.mode='fast': accepted values are 'sync', 'async'"),
        (dict(trainer=dict(mode="async", max_staleness=0)), "trainer.max_staleness=0"),
        (dict(learner=dict(aggregation="sum")), "learner.aggregation='sum'"),
        (dict(group_size=1), "group_size=1"),
        (dict(learner=dict(micro_batch_size=0)), "learner.micro_batch_size=0: must be >= 1"),
        (dict(learner=dict(zero_stage=4)), "learner.zero_stage=4: accepted values are 1, 2, 3"),
        (dict(rollout=dict(oracle_samples_per_group=16)), "rollout.oracle_samples_per_group=16"),
        (dict(rollout=dict(temperature=0.0)), "rollout.temperature"),
        (dict(rollout=dict(max_model_len=1024)), "must fit rollout.max_model_len"),
        (dict(learner=dict(clip_eps_low=1.0)), "learner.clip_eps_low=1.0: must be in (0, 1.0)"),
        (dict(learner=dict(clip_eps_high=0.0)), "learner.clip_eps_high=0.0: must be > 0"),
        (dict(rollout=dict(top_p=0.9)), "rollout.top_p=0.9: must be 1.0 for training"),
        (dict(rollout=dict(top_k=50)), "rollout.top_k=50: must be 0 for training"),
        (dict(learner=dict(tis_cap=0.0)), "learner.tis_cap=0.0: must be > 0"),
        (dict(trainer=dict(dynamic_sampling_max_rounds=-1)), "trainer.dynamic_sampling_max_rounds=-1: must be >= 0"),
        (dict(agent=dict(max_turns=0)), "agent.max_turns=0: must be >= 1"),
        (dict(agent=dict(max_format_errors=0)), "agent.max_format_errors=0: must be >= 1"),
        (dict(agent=dict(max_tokens=0)), "agent.max_tokens=0: must be >= 1"),
        (dict(rollout=dict(mode="agent"), agent=dict(max_tokens=8192)), "agent.max_tokens (8192) must fit"),
        (dict(agent=dict(max_observation_chars=0)), "agent.max_observation_chars=0: must be >= 1"),
        (dict(agent=dict(episode_timeout_s=0.0)), "agent.episode_timeout_s=0.0: must be > 0"),
        (dict(agent=dict(command_timeout_s=-1.0)), "agent.command_timeout_s=-1.0: must be > 0"),
        (dict(reward=dict(max_pair_seconds=0.0)), "reward.max_pair_seconds=0.0: must be > 0"),
        (dict(reward=dict(answer_cpu_factor=0.5)), "reward.answer_cpu_factor=0.5: must be >= 1"),
    ],
)
def test_validation_names_the_field(change, message):
    cfg = config.TrainConfig()
    for key, value in change.items():
        if isinstance(value, dict):
            setattr(cfg, key, dataclasses.replace(getattr(cfg, key), **value))
        else:
            setattr(cfg, key, value)
    with pytest.raises(config.ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config.validate(cfg)


def test_every_field_has_a_comment():
    import inspect

    source = inspect.getsource(config)
    for cls in (
        config.ModelConfig,
        config.DataConfig,
        config.RolloutConfig,
        config.RewardConfig,
        config.LearnerConfig,
        config.TrainerConfig,
        config.RayConfig,
        config.AgentConfig,
        config.TrainConfig,
    ):
        lines = inspect.getsource(cls).splitlines()
        for f in dataclasses.fields(cls):
            idx = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{f.name}:"))
            assert lines[idx - 1].strip().startswith("#"), f"{cls.__name__}.{f.name} has no comment line above it"
    assert source


def test_docs_config_is_generated_from_the_schema():
    from pathlib import Path

    from conf.reference import render

    doc = Path(__file__).resolve().parents[2] / "docs" / "config.md"
    assert doc.read_text().strip() == render().strip(), (
        "docs/config.md is stale: run `python -m conf.reference > docs/config.md`"
    )


def test_an_engine_outside_training_sets_its_fields_and_keeps_every_other_default():
    given = dict(
        max_new_tokens=7,
        max_model_len=99,
        num_gpus=1.0,
        tensor_parallel_size=2,
        gpu_memory_utilization=0.3,
        kv_cache_gib=4,
        max_prompts_per_call=5,
    )
    got, default = config.engine_config(**given), config.RolloutConfig()
    changed = {f.name for f in dataclasses.fields(got) if getattr(got, f.name) != getattr(default, f.name)}
    assert changed == set(given)
    assert (got.temperature, got.top_p) == (default.temperature, default.top_p)
    assert config.engine_config(**given, temperature=0.5, top_p=0.9).top_p == 0.9
