"""Progress of the long jobs (data building and validation, evaluation, the SFT warm start):
one helper, so that every command shows the same count, rate and ETA.

On a terminal it draws a tqdm bar. Anywhere else (CI, a Ray job's log, a file) a bar is a
stream of carriage returns that log viewers show as one ever-growing line, so it writes one
plain line every `every_s` seconds and one at the end instead:

    [tests] 12/40 validation runs, 3.1/min, eta 9 min

The caller chooses where plain lines go (`emit`): commands that log through `conf/logs.py`
pass their logger's `info`, so the lines reach stdout like every other `[tag]` line.

Lives in `conf/` because every package uses it and `learner/` may not import `actors/`
(tests/test_layering.py). Standard library plus tqdm (a dependency of transformers and vLLM).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO


def rate_text(per_s: float) -> str:
    """Items per second, or per minute when fewer than one a second (test runs, SFT steps)."""
    return f"{per_s:.1f}/s" if per_s >= 1 else f"{60 * per_s:.1f}/min"


def duration_text(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Progress:
    """`done` out of `total` (None: unknown, e.g. a stream of candidates) for one job.

    Use as a context manager; `update(n, note=...)` after each piece of work. `note` is shown
    after the counts (a loss, how many were kept). A bar or plain lines, never both."""

    def __init__(
        self,
        tag: str,
        what: str,
        total: int | None,
        *,
        every_s: float = 30.0,
        emit: Callable[[str], None] = _stderr,
        stream: TextIO | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tag, self.what, self.total = tag, what, total
        self.every_s, self.emit, self.clock = every_s, emit, clock
        self.done, self.note = 0, ""
        self.started = self.last = clock()
        self._shown = -1  # the count of the last plain line (the closing line is not repeated)
        stream = stream if stream is not None else sys.stderr
        self._bar: Any = None
        if stream.isatty() if tty is None else tty:
            # tqdm draws only on a terminal
            from tqdm import tqdm

            # disable=False explicitly: conf/logs.py sets TQDM_DISABLE=1 to silence libraries'
            # bars, and tqdm reads that variable as the default of this argument.
            self._bar = tqdm(total=total, desc=f"[{tag}] {what}", file=stream, disable=False, dynamic_ncols=True)

    def rate(self) -> float:
        """Items per second since the start."""
        elapsed = self.clock() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta_s(self) -> float:
        """Seconds left at the rate so far; inf before the first item, nan with no total."""
        if self.total is None:
            return math.nan
        rate = self.rate()
        return (self.total - self.done) / rate if rate > 0 else math.inf

    def line(self) -> str:
        count = f"{self.done}/{self.total}" if self.total is not None else str(self.done)
        text = f"[{self.tag}] {count} {self.what}, {rate_text(self.rate())}"
        if self.total is not None:
            text += f", eta {duration_text(self.eta_s())}"
        return text + (f", {self.note}" if self.note else "")

    def update(self, n: int = 1, note: str = "") -> None:
        self.done += n
        if note:
            self.note = note
        if self._bar is not None:
            if note:
                self._bar.set_postfix_str(note, refresh=False)
            self._bar.update(n)
            return
        now = self.clock()
        if now - self.last >= self.every_s or self.done == self.total:
            self._print()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self._shown != self.done:
            self._print()

    def _print(self) -> None:
        self.emit(self.line())
        self.last, self._shown = self.clock(), self.done

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
