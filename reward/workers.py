"""Run a function over items in worker processes, each item under a wall-clock limit, in order.

The reward's time cap (`reward.similarity`) is decided from sizes before SequenceMatcher runs,
so it is deterministic, but inputs built to defeat its estimate (many small matching blocks
between a long and a short diff: the matcher recurses into nearly the whole long side again
and again) can still take tens of seconds, and SequenceMatcher runs in C: it cannot be
interrupted inside the process. The trainer's reward pool bounds each call and kills the worker
(actors/driver/reward_pool.py); this is the same backstop for `python -m reward.score`: an item still
running after `timeout_s` has its process killed and replaced, and gets `on_timeout(item)`.

Results come back in input order; at most `workers` items are in flight, so memory holds
`workers` items plus the results not yet written.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any


def _serve(conn: Connection, fn: Callable[[Any], Any]) -> None:
    while True:
        task = conn.recv()
        if task is None:
            return
        index, item = task
        conn.send((index, fn(item)))


@dataclass
class _Worker:
    process: Any
    conn: Connection
    task: tuple[int, Any] | None = None  # (index, item) in flight
    started: float = 0.0


class LimitedPool:
    def __init__(self, fn: Callable[[Any], Any], workers: int, timeout_s: float | None) -> None:
        self.fn, self.timeout_s = fn, timeout_s
        self.ctx = mp.get_context("fork")  # the parent imports only the reward package: cheap to fork
        self.workers = [self._spawn() for _ in range(workers)]
        self.timed_out = 0

    def _spawn(self) -> _Worker:
        parent, child = self.ctx.Pipe()
        process = self.ctx.Process(target=_serve, args=(child, self.fn), daemon=True)
        process.start()
        child.close()
        return _Worker(process, parent)

    def map(self, items: Iterable[Any], on_timeout: Callable[[Any], Any]) -> Iterator[Any]:
        """fn(item) for every item, in order; `on_timeout(item)` for an item over the limit."""
        source = enumerate(items)
        done: dict[int, Any] = {}
        next_out, exhausted = 0, False
        while True:
            for w in self.workers:  # hand out work
                if w.task is None and not exhausted:
                    task = next(source, None)
                    if task is None:
                        exhausted = True
                        break
                    w.task, w.started = task, time.monotonic()
                    w.conn.send(task)
            busy = [w for w in self.workers if w.task is not None]
            if not busy and exhausted:
                break
            ready = wait([w.conn for w in busy], timeout=self._wait_s(busy))
            for w in busy:
                if w.conn in ready:
                    index, result = w.conn.recv()
                    done[index], w.task = result, None
                elif self.timeout_s is not None and time.monotonic() - w.started > self.timeout_s:
                    assert w.task is not None
                    index, item = w.task
                    done[index] = on_timeout(item)
                    self.timed_out += 1
                    self._replace(w)
            while next_out in done:
                yield done.pop(next_out)
                next_out += 1
        while next_out in done:
            yield done.pop(next_out)
            next_out += 1

    def _wait_s(self, busy: list[_Worker]) -> float | None:
        if self.timeout_s is None or not busy:
            return None
        return max(0.0, min(w.started for w in busy) + self.timeout_s - time.monotonic())

    def _replace(self, w: _Worker) -> None:
        w.process.kill()  # a C loop cannot be interrupted: end the process
        w.process.join()
        w.conn.close()
        fresh = self._spawn()
        w.process, w.conn, w.task = fresh.process, fresh.conn, None

    def close(self) -> None:
        for w in self.workers:
            if w.process.is_alive():
                w.conn.send(None)
                w.process.join(timeout=5)
                if w.process.is_alive():
                    w.process.kill()
            w.conn.close()
