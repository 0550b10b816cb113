"""The test-pool commands' keys (conf/overrides.py) are training's: `reward.execution.*` and
`ray.address` as `key=value`, their former flags refused with the new key."""

from __future__ import annotations

import dataclasses

import pytest
from hydra import compose, initialize

from actors import replay
from conf import config, overrides
from data import build, validate
from data.inject import __main__ as inject
from reward import execute

config.register()

POOL = [
    "reward.execution.repos=['acme/calc=/clones/calc',/clones/requests]",  # quoted: an '=' inside, as Hydra wants
    "reward.execution.num_runners=3",
    "reward.execution.wall_s=45",
    "reward.execution.cache_dir=/tmp/cache",
    "ray.address=auto",
]

# Each command with the arguments it needs besides the pool's.
COMMANDS = {
    "reward.execute": (execute.main, ["--instances", "demo", "--predictions", "p.jsonl", "--out", "o"]),
    "data.validate": (validate.main, ["--data", "demo", "--out", "o"]),
    "data.inject": (inject.main, ["--data", "demo", "--out", "o"]),
    "actors.replay": (replay.main, ["--data", "demo", "--instance", "i", "--turns", "t.json"]),
}


def test_the_training_overrides_give_the_same_pool():
    with initialize(config_path="../../conf", version_base=None):
        train = config.load(compose("config", overrides=POOL))
    rest, execution, address = overrides.pool_config(["--out", "o", *POOL, "--limit", "2"], "cmd")
    assert rest == ["--out", "o", "--limit", "2"]  # the flags, in order, for the command's parser
    assert execution.repos == ["acme/calc=/clones/calc", "/clones/requests"] and execution.num_runners == 3
    # but the laptop preset's half CPU per runner (conf/cluster/local.yaml): no presets here
    assert execution == dataclasses.replace(train.reward.execution, num_cpus=1.0)
    assert address == train.ray.address == "auto"


def test_a_commands_own_default_stays_unless_given():
    base = config.ExecutionConfig(wall_s=30.0)  # data.inject's
    assert overrides.pool_config([], "cmd", base)[1].wall_s == 30.0
    assert overrides.pool_config(["reward.execution.wall_s=5"], "cmd", base)[1].wall_s == 5.0


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("flag", sorted(overrides.FORMER_FLAGS))
def test_a_former_flag_is_refused_with_its_new_key(command, flag, capsys):
    main, args = COMMANDS[command]
    with pytest.raises(SystemExit) as stop:
        main([*args, flag, "1"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"`{flag}` is now `{overrides.FORMER_FLAGS[flag]}`" in err and "Traceback" not in err


def test_a_key_outside_the_pool_is_named():
    with pytest.raises(config.ConfigError, match=r"rollout: .*\(cmd takes reward\.\*, ray\.\*\)"):
        overrides.pool_config(["rollout.num_actors=2"], "cmd")
    with pytest.raises(config.ConfigError, match="reward.execution.wall_s"):
        overrides.pool_config(["reward.execution.wall_s=soon"], "cmd")


@pytest.mark.parametrize("flag", sorted(overrides.ENGINE_FLAGS))
def test_the_model_injectors_former_flags_are_refused_with_their_new_keys(flag, capsys):
    with pytest.raises(SystemExit) as stop:
        inject.main(["--data", "demo", "--out", "o", "--injector", "model", flag, "1"])
    assert stop.value.code == 2
    assert f"`{flag}` is now `{overrides.ENGINE_FLAGS[flag]}`" in capsys.readouterr().err


def test_the_model_injectors_engine_takes_trainings_keys():
    sections = overrides.pool_sections() | {"model": config.ModelConfig(), "rollout": inject.ENGINE_DEFAULTS}
    argv = ["--data", "demo", "model.name=tiny", "rollout.max_new_tokens=32", "rollout.num_gpus=1"]
    rest, typed = overrides.parse(argv, "cmd", sections, overrides.FORMER_FLAGS, engine=overrides.ENGINE_KEYS)
    assert rest == ["--data", "demo"] and typed["model"] == config.ModelConfig(name="tiny")
    assert typed["rollout"] == dataclasses.replace(inject.ENGINE_DEFAULTS, max_new_tokens=32, num_gpus=1.0)
    with pytest.raises(config.ConfigError, match="rollout.num_actors: not read by cmd"):
        overrides.parse(["rollout.num_actors=2"], "cmd", sections, {}, engine=overrides.ENGINE_KEYS)
    with pytest.raises(config.ConfigError, match="model.init_seed: not read by cmd"):
        overrides.parse(["model.init_seed=3"], "cmd", sections, {}, engine=overrides.ENGINE_KEYS)


@pytest.mark.parametrize("flag", sorted(overrides.CONTEXT_FLAGS))
def test_the_context_models_former_flags_are_refused_with_their_new_keys(flag, capsys):
    with pytest.raises(SystemExit) as stop:
        build.parse_args(["--git", "g", "--out", "o", "--context", "model", flag, "1"])
    assert stop.value.code == 2
    assert f"`{flag}` is now `{overrides.CONTEXT_FLAGS[flag]}`" in capsys.readouterr().err
