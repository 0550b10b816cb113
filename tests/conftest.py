"""Shared fixtures. The smoke run is expensive (Ray + vLLM + DeepSpeed, ~1 min), so one run per
test session serves every test that needs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@dataclass
class SmokeRun:
    run_dir: Path
    output: str  # the driver's stdout + stderr

    def metrics(self) -> list[dict]:
        return [json.loads(line) for line in (self.run_dir / "metrics.jsonl").read_text().splitlines()]

    def rollouts(self, step: int) -> list[dict]:
        path = self.run_dir / "rollouts" / f"step_{step:06d}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]


def run_train(run_dir: Path, *overrides: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python train.py experiment=smoke run_dir=... overrides` in a fresh process, as a user runs it."""
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, str(REPO / "train.py"), "experiment=smoke", f"run_dir={run_dir}", *overrides]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> SmokeRun:
    run_dir = tmp_path_factory.mktemp("smoke") / "run"
    proc = run_train(run_dir)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"the smoke run failed (exit {proc.returncode}):\n{output[-6000:]}")
    return SmokeRun(run_dir, output)
