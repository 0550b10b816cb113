"""Scoring under limits: a CPU budget per answer (`cpu_limit`) and worker processes that are
killed and replaced when an item passes its limits (`LimitedPool`, for `python -m reward.score`).

Why a CPU budget: the reward's guards are decided from sizes before the work runs (the pair cap
in `reward.similarity`, the size guard and the work cap in `reward.apply`), so they are
deterministic, but inputs built to defeat the pair estimate (many small matching blocks between
a long and a short diff: the matcher recurses into nearly the whole long side again and again)
still cost many times their estimate, and SequenceMatcher runs in C: it cannot be interrupted
inside the process. So the process that scores an answer is given a kernel limit on its CPU time
for that answer: `cpu_limit` sets the soft RLIMIT_CPU to the CPU the process has used plus the
budget, rounded up to a whole second (the kernel's unit), and puts the previous limit back after
the answer. Past it the kernel sends SIGXCPU, whose default action ends the process wherever it
is, inside a C loop included; its owner replaces it (the trainer's reward pool,
actors/driver/reward_pool.py, or `LimitedPool` here). One answer's scoring therefore never uses
more than its budget plus one second of CPU in one try.

Why this and not a timer: a timer thread cannot run while a C loop holds the GIL, and a wall
clock counts the machine's load, not the answer (a healthy answer on a loaded node would be
killed); the kernel's CPU accounting sees neither. Why not a child process per answer: the
answer's state (code context, oracle diffs) would cross a pipe for every answer, and forking the
trainer's reward actor, a multi-threaded Ray worker, is not safe; the limit in the worker's own
process needs no copy. The price: in the trainer a kill ends the reward actor, which the pool
restarts before it redoes the batch; answers over the budget are rare once the caps decided
from sizes have run. SIGXCPU's default action also dumps core, so `cpu_limit` also sets
RLIMIT_CORE to 0 (a killed worker must not write its heap to disk) and puts SIGXCPU's default
action back where something had replaced it (a handler would keep the process alive).

`LimitedPool`'s own backstop is a wall clock per item: an item still running after `timeout_s`
has its process killed and replaced. Both limits end in `on_limit(item, reason)`.

Results come back in input order; at most `workers` items are in flight, so memory holds
`workers` items plus the results not yet written.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import resource
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any


def process_cpu_s() -> float:
    """CPU seconds this process has used (every thread, user and system), as RLIMIT_CPU counts."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def cpu_limit(seconds: float | None) -> Iterator[None]:
    """Let the body use about `seconds` more CPU (at least that, under a second more) before the
    kernel ends this process with SIGXCPU; None = no limit. Restores the previous soft limit."""
    if seconds is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    _, core_hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, core_hard))
    if signal.getsignal(signal.SIGXCPU) != signal.SIG_DFL:
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)  # the main thread's (Ray runs actor methods there)
    limit = math.ceil(process_cpu_s() + seconds)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def ended_by_cpu_limit(exitcode: int | None) -> bool:
    """Whether a process's exit code (multiprocessing's: -signal) is the CPU limit's kill."""
    return exitcode == -signal.SIGXCPU


def _serve(conn: Connection, fn: Callable[[Any], Any], cpu_s: float | None) -> None:
    while True:
        task = conn.recv()
        if task is None:
            return
        index, item = task
        with cpu_limit(cpu_s):
            result = fn(item)
        conn.send((index, result))


@dataclass
class _Worker:
    process: Any
    conn: Connection
    task: tuple[int, Any] | None = None  # (index, item) in flight
    started: float = 0.0


class LimitedPool:
    """fn over items in `workers` processes; an item gets `cpu_s` of CPU and `timeout_s` of wall
    clock (None = no limit) before its process is killed and replaced."""

    def __init__(
        self, fn: Callable[[Any], Any], workers: int, timeout_s: float | None, cpu_s: float | None = None
    ) -> None:
        self.fn, self.timeout_s, self.cpu_s = fn, timeout_s, cpu_s
        self.ctx = mp.get_context("fork")  # the parent imports only the reward package: cheap to fork
        self.workers = [self._spawn() for _ in range(workers)]
        self.timed_out = 0

    def _spawn(self) -> _Worker:
        parent, child = self.ctx.Pipe()
        process = self.ctx.Process(target=_serve, args=(child, self.fn, self.cpu_s), daemon=True)
        process.start()
        child.close()
        return _Worker(process, parent)

    def map(self, items: Iterable[Any], on_limit: Callable[[Any, str], Any]) -> Iterator[Any]:
        """fn(item) for every item, in order; `on_limit(item, reason)` for an item whose process
        passed a limit or died (reason: "took longer than 60 s", "used more than 30 s of CPU",
        "ended its worker process (exit code -9)")."""
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
                assert w.task is not None
                index, item = w.task
                if w.conn in ready:
                    try:
                        index, result = w.conn.recv()
                    except EOFError:  # the process ended: the CPU limit, or killed from outside
                        w.process.join()
                        done[index] = on_limit(item, self._death(w.process.exitcode))
                        self.timed_out += 1
                        self._replace(w)
                        continue
                    done[index], w.task = result, None
                elif self.timeout_s is not None and time.monotonic() - w.started > self.timeout_s:
                    done[index] = on_limit(item, f"took longer than {self.timeout_s:g} s")
                    self.timed_out += 1
                    self._replace(w)
            while next_out in done:
                yield done.pop(next_out)
                next_out += 1
        while next_out in done:
            yield done.pop(next_out)
            next_out += 1

    def _death(self, exitcode: int | None) -> str:
        if ended_by_cpu_limit(exitcode):
            return f"used more than {self.cpu_s:g} s of CPU"
        return f"ended its worker process (exit code {exitcode})"

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
