"""rollout.cpu_affinity / learner.cpu_affinity: conf.device.pin_cpus pins every thread of a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conf.device import pin_cpus

ROOT = Path(__file__).resolve().parents[2]

# Runs in its own process: pinning the test process would pin every later test too.
PROGRAM = """
import json, os, threading
from conf.device import pin_cpus
stop = threading.Event()
before = threading.Thread(target=stop.wait); before.start()        # a thread that already runs
pin_cpus([{core}], "rollout.cpu_affinity")
after = threading.Thread(target=stop.wait); after.start()          # and one started later
masks = {{int(t): sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}}
stop.set()
print(json.dumps(list(masks.values())))
"""


def test_every_thread_of_the_process_is_pinned():
    core = max(os.sched_getaffinity(0))
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(core=core)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    masks = json.loads(proc.stdout)
    assert len(masks) >= 3 and all(mask == [core] for mask in masks), masks


def test_a_core_that_is_not_there_is_named_with_the_field():
    missing = max(os.sched_getaffinity(0)) + 1000
    with pytest.raises(ValueError, match=rf"learner.cpu_affinity=\[{missing}\]: cores \[{missing}\] are not available"):
        pin_cpus([missing], "learner.cpu_affinity")
    pin_cpus([], "learner.cpu_affinity")  # empty: nothing happens
