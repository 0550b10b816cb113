"""Fixtures of the learner tests that start Ray themselves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors.cluster.join import loopback_only


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A 2-CPU local Ray for one test module; the learner group's placement group needs it."""
    import ray

    loopback_only()  # every Ray socket on 127.0.0.1
    assert not ray.is_initialized(), "another test left Ray running"
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
