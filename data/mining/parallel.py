"""Run mining chunks in-process or as Ray tasks, yielding results in submission order.

A chunk is a run of consecutive PRs on the first-parent history (a commit range) or of
consecutive SWE-bench rows; one Ray task mines one chunk with its own git processes. Results
come back in chunk order whatever order the tasks finish in, so the duplicate rule (decided
by the driver, first kept wins) and the shard contents are the same as in-process. At most
`8 x workers` chunks are in flight or waiting to be consumed, so memory stays bounded on any
history length; fewer leaves workers idle behind one slow chunk (results leave in order).

On a cluster every node needs the project installed and the clone at the same path
(a shared file system, or the clone copied to each node).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def map_in_process(fn: Callable[..., list[R]], chunks: Iterable[Any], *args: Any) -> Iterator[R]:
    """fn(chunk, *args) for each chunk, here; results flattened in order."""
    for chunk in chunks:
        yield from fn(chunk, *args)


def map_on_ray(fn: Callable[..., list[R]], chunks: Iterable[Any], *args: Any, workers: int) -> Iterator[R]:
    """fn(chunk, *args) for each chunk as Ray tasks (1 CPU each); results flattened in order."""
    # Ray: only when the chunks run as Ray tasks
    import ray

    remote_fn = ray.remote(num_cpus=1)(fn)
    shared = [ray.put(a) for a in args]  # shipped once, not once per task
    window: deque[Any] = deque()
    for chunk in chunks:
        window.append(remote_fn.remote(chunk, *shared))
        if len(window) >= 8 * workers:
            yield from ray.get(window.popleft())
    while window:
        yield from ray.get(window.popleft())
