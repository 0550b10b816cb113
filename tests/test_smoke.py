"""The whole system end to end: `python train.py experiment=smoke` through the real driver,
real Ray actors, a real vLLM engine and real DeepSpeed ranks (2 steps, group_size 16)."""

import re
from collections import Counter
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM


def test_every_prompt_got_a_full_group_and_every_rollout_a_reward(smoke_run):
    metrics = smoke_run.metrics()
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        assert m["num_rollouts"] == 2 * 16
        rollouts = smoke_run.rollouts(m["step"])
        assert len(rollouts) == 32
        assert set(Counter(r["instance_id"] for r in rollouts).values()) == {16}
        for r in rollouts:
            assert isinstance(r["reward"], float) and -1.0 <= r["reward"] <= 1.0
        # The one oracle sample per group scores 1.0; the random model's own samples fail the
        # format (-1): every group has a reward spread, hence a non-zero advantage.
        oracle = [r for r in rollouts if r["finish_reason"] == "oracle"]
        assert len(oracle) == 2 and all(r["reward"] == 1.0 for r in oracle)
        assert m["zero_signal_frac"] == 0.0
        # Sync mode is on-policy: every sampled rollout was made by the weights of the previous update.
        assert {r["policy_version"] for r in rollouts if r["finish_reason"] != "oracle"} == {m["step"] - 1}


def test_learner_changed_and_the_broadcast_landed(smoke_run):
    for m in smoke_run.metrics():
        assert m["params_changed"] == 1.0
        assert m["policy_version"] == m["step"]
        # Before the sync the engine still holds the old weights: its logprobs of the probe
        # sequence differ from the updated learner's. After it they agree to float32 noise.
        assert m["sync_probe_diff_before"] > 1e-2
        assert m["sync_probe_diff_after"] < 1e-4


def test_metrics_have_the_documented_fields(smoke_run):
    required = {
        "step",
        "policy_version",
        "num_rollouts",
        "reward_mean",
        "reward_std",
        "format_error_rate",
        "generate_s",
        "reward_s",
        "train_s",
        "sync_s",
        "gen_tokens_per_s",
    }
    for m in smoke_run.metrics():
        assert required <= set(m)
        assert m["gen_tokens_per_s"] > 0 and m["train_s"] > 0
    assert "[step 2/2]" in smoke_run.output


def test_hugging_face_export_loads(smoke_run):
    model = AutoModelForCausalLM.from_pretrained(smoke_run.run_dir / "hf")
    assert model.config.num_hidden_layers == 2
    assert (smoke_run.run_dir / "hf" / "tokenizer.json").is_file()


@pytest.mark.parametrize("field", ["reward_mean", "format_error_rate"])
def test_random_model_fails_the_format(smoke_run, field):
    first = smoke_run.metrics()[0]
    # 15 sampled answers of a random 2-layer model per group are malformed: reward -1.
    assert first[field] == (-1.0 if field == "reward_mean" else 1.0)


def test_the_docs_document_every_metrics_key_and_no_other(smoke_run, tests_run, agent_run):
    table = (Path(__file__).resolve().parent.parent / "docs" / "metrics.md").read_text()
    documented = {
        key
        for line in table.splitlines()
        if line.startswith("| `")
        for key in re.findall(r"`([a-z_]+)`", line.split("|")[1])
    }
    # The test-runner pool's counters appear with the reward kinds that run tests, the agent_*
    # metrics with rollout.mode=agent; selfplay_* and prove_s with trainer.selfplay
    # (tests/test_selfplay.py holds those).
    logged = set().union(*(m.keys() for m in smoke_run.metrics() + tests_run.metrics() + agent_run.metrics()))
    assert logged - documented == set(), "logged but not in docs/metrics.md's table"
    selfplay = {k for k in documented if k.startswith("selfplay_")} | {"prove_s"}
    assert documented - logged == {"rerun"} | selfplay, "in docs/metrics.md's table but never logged"


def test_tensorboard_shows_the_metrics_jsonl_values(smoke_run):
    if "tensorboard" not in smoke_run.loggers:
        pytest.skip('the tensorboard extra is not installed: pip install -e ".[tensorboard]"')
    from actors.observe.loggers import read_scalars, scalars

    shown = read_scalars(smoke_run.run_dir / "tensorboard")
    written = {(tag, m["step"]): value for m in smoke_run.metrics() for tag, value in scalars(m).items()}
    assert {(tag, step) for tag, steps in shown.items() for step in steps} == set(written)
    assert {"reward/reward_mean", "learner/loss", "timing/train_s", "fleet/queue_depth", "sync/sync_mb_per_s"} <= set(
        shown
    )
    # Event files hold float32.
    assert {(tag, step): shown[tag][step] for tag, step in written} == pytest.approx(written, rel=1e-6)


def test_wandb_wrote_an_offline_run(smoke_run):
    if "wandb" not in smoke_run.loggers:
        pytest.skip('the wandb extra is not installed: pip install -e ".[wandb]"')
    run_id = (smoke_run.run_dir / "wandb_id").read_text().strip()
    (run,) = (smoke_run.run_dir / "wandb").glob(f"offline-run-*-{run_id}")
    assert (run / f"run-{run_id}.wandb").stat().st_size > 0


def test_tis_and_dynamic_sampling_run_end_to_end(tests_run):
    """The tests-reward run also has learner.tis_cap=2 and trainer.dynamic_sampling=true (conftest)."""
    (metrics,) = tests_run.metrics()
    # float32 on the CPU: the engine's sampling logprobs and the learner's agree to ~1e-6.
    assert 0.0 <= metrics["logprob_diff_mean"] <= metrics["logprob_diff_max"] < 1e-3
    assert metrics["rows_trained"] > 0 and metrics["params_changed"] == 1.0
    assert metrics["dynamic_sampling_rounds"] == 0 and metrics["dynamic_sampling_dropped"] == 0
