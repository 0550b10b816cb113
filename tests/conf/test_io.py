"""conf/io.py's lock: the one every build-once cache (models, environments, snapshots) takes."""

from __future__ import annotations

import fcntl

import pytest

from conf.io import locked


def _try_lock(path: str) -> None:
    with open(path, "w") as other:  # a second open file description: flock conflicts across them
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_locked_excludes_others_for_the_block_only(tmp_path):
    target = tmp_path / "cache" / "model"
    with locked(target):
        assert (tmp_path / "cache").is_dir()  # the directory is made for the lock file
        with pytest.raises(BlockingIOError):
            _try_lock(f"{target}.lock")
    _try_lock(f"{target}.lock")
