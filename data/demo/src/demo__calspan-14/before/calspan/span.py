"""Inclusive date spans: length, iteration, membership, overlap, and a split by month."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta

from calspan.months import month_end, next_month_start


@dataclass(frozen=True)
class DateSpan:
    """From `start` to `end`, both included: a one-day span has start == end."""

    start: date
    end: date

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"span ends ({self.end}) before it starts ({self.start})")

    def __len__(self) -> int:
        return (self.end - self.start).days + 1

    def __iter__(self) -> Iterator[date]:
        day = self.start
        while day <= self.end:
            yield day
            day += timedelta(days=1)

    def __contains__(self, day: date) -> bool:
        return self.start <= day <= self.end

    def overlaps(self, other: DateSpan) -> bool:
        return self.start < other.end and other.start < self.end

    def intersection(self, other: DateSpan) -> DateSpan | None:
        if not self.overlaps(other):
            return None
        return DateSpan(max(self.start, other.start), min(self.end, other.end))

    def by_month(self) -> list[DateSpan]:
        """The span cut at month boundaries: one piece per calendar month it touches."""
        pieces = []
        start = self.start
        while start <= self.end:
            pieces.append(DateSpan(start, min(month_end(start), self.end)))
            start = next_month_start(start)
        return pieces
