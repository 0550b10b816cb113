"""Bad input to the driver ends in one line naming the field, not a traceback or a hang."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data.demo import demo_parquet_path


@pytest.mark.parametrize(
    "override, message",
    [
        ("group_size=1", "[error] group_size=1: GRPO needs at least 2 samples per group"),
        ("learner.aggregation=sum", "[error] learner.aggregation='sum': accepted values are"),
        ("data.path=/no/such/dir", "[error] data.path='/no/such/dir': no such file or directory"),
        # More rollout actors than 2 CPUs hold: refused at start-up instead of waiting forever.
        ("rollout.num_actors=10", "[error] the cluster cannot hold this config: 6.5 CPU in total"),
    ],
)
def test_bad_config_is_refused_by_name(train_cli, tmp_path, override, message):
    proc = train_cli(tmp_path / "run", override, timeout=300)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_hub_id_neither_cached_nor_reachable_is_one_line(train_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    proc = train_cli(tmp_path / "run", "model.name=acme/missing", "model.revision=v2", timeout=300)
    assert proc.returncode == 2
    line = "[error] model.name='acme/missing' (revision 'v2'): not in the Hugging Face cache"
    assert line in proc.stderr and "`hf download acme/missing --revision v2`" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_selfplay_on_instances_checked_out_from_a_clone_is_refused_before_ray(train_cli, tmp_path):
    """Self-play proves its bugs in an instance's own files: a git-snapshot instance (a converted
    SWE-bench row, a validated mined PR) is refused at start-up, named, with what to do."""
    demo = pq.read_table(demo_parquet_path())
    rows = demo.to_pylist()[:2]
    rows[1]["environment"] = '{"snapshot": "git"}'
    path = tmp_path / "git_rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=demo.schema), path)
    proc = train_cli(tmp_path / "run", "trainer.selfplay=true", f"data.path={path}", timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "[error] trainer.selfplay=true: " in proc.stderr and "1 of 2 row(s)" in proc.stderr
    assert f"{rows[1]['instance_id']}: git_snapshot" in proc.stderr and "Traceback" not in proc.stderr
