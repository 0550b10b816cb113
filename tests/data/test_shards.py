"""Sharded output: sizes, atomic renames, no half shard after an interruption, the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from data import build as build_mod
from data.build import BuildConfig, build
from data.fixtures.synthetic import generate_history
from data.schema import SCHEMA_VERSION
from data.shards import MANIFEST, OutputExistsError, ShardWriter, prepare_output, write_manifest


def _row(i: int) -> dict:
    return {
        "instance_id": f"o__r-{i}",
        "repo": "o/r",
        "base_commit": "0" * 40,
        "problem_statement": f"p{i}",
        "patch": f"diff {i}",
        "test_patch": None,
        "code_context": [{"path": "a.py", "content": "x"}],
        "oracle_new_content": [{"path": "a.py", "content": "y"}],
        "pr_number": i,
    }


def test_shards_fill_in_order_and_only_complete_ones_are_visible(tmp_path: Path) -> None:
    with ShardWriter(tmp_path, shard_size=4, row_group_size=2) as w:
        for i in range(6):
            w.write(_row(i))
            if i == 5:  # shard 0 sealed; shard 1 open under its underscore name, invisible
                assert sorted(p.name for p in tmp_path.iterdir()) == ["_shard-00001.parquet", "shard-00000.parquet"]
                assert pads.dataset(tmp_path).count_rows() == 4
    assert w.shards == [{"name": "shard-00000.parquet", "rows": 4}, {"name": "shard-00001.parquet", "rows": 2}]
    rows = pads.dataset(tmp_path).to_table().to_pylist()
    assert [r["instance_id"] for r in rows] == [f"o__r-{i}" for i in range(6)]
    assert rows[0]["pr_number"] == 0 and rows[0]["linked_issues"] is None


def test_an_error_discards_the_open_shard(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), ShardWriter(tmp_path, shard_size=3, row_group_size=1) as w:
        for i in range(5):
            w.write(_row(i))
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard-00000.parquet"]


def test_prepare_output_refuses_an_existing_dataset(tmp_path: Path) -> None:
    (tmp_path / "shard-00000.parquet").write_bytes(b"")
    (tmp_path / "_shard-00001.parquet").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("kept")
    with pytest.raises(OutputExistsError, match="--overwrite"):
        prepare_output(tmp_path, overwrite=False)
    prepare_output(tmp_path, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]  # only our files are removed


def test_manifest_is_written_atomically(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"a": 1})
    assert json.loads((tmp_path / MANIFEST).read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("synthetic")
    generate_history(path, num_prs=30)
    return path


def test_build_writes_shards_and_manifest(synthetic: Path, tmp_path: Path) -> None:
    manifest = build(BuildConfig(git=(str(synthetic),), out=str(tmp_path), shard_size=5))
    on_disk = json.loads((tmp_path / MANIFEST).read_text())
    assert on_disk == manifest
    assert manifest["schema_version"] == SCHEMA_VERSION and manifest["source"]["kind"] == "git"
    # 30 PRs: #10, #20, #30 are dependabot bumps; #7, #14, #21, #28 change docs only.
    assert {k: v for k, v in manifest["counts"].items() if v} == {"kept": 23, "bot": 3, "no_code": 4}
    assert [s["rows"] for s in manifest["shards"]] == [5, 5, 5, 5, 3]
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST] + [f"shard-0000{i}.parquet" for i in range(5)]
    assert pads.dataset(tmp_path).count_rows() == 23


def test_interrupted_build_leaves_no_half_shard(
    synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = build_mod.iter_outcomes

    def interrupted(*args: object, **kw: object):
        for i, outcome in enumerate(real(*args, **kw)):  # type: ignore[arg-type]
            if i == 12:
                raise KeyboardInterrupt
            yield outcome

    monkeypatch.setattr(build_mod, "iter_outcomes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build(BuildConfig(git=(str(synthetic),), out=str(tmp_path), shard_size=4))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["shard-00000.parquet", "shard-00001.parquet"]  # no manifest, no _shard
    assert pads.dataset(tmp_path).count_rows() == 8
