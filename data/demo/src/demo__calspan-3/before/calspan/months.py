"""Month arithmetic on `datetime.date`: month lengths and ends, adding whole months."""

from __future__ import annotations

import calendar
from datetime import date


def days_in_month(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def month_start(day: date) -> date:
    return day.replace(day=1)


def month_end(day: date) -> date:
    return day.replace(day=days_in_month(day.year, day.month))


def add_months(day: date, months: int) -> date:
    """The same day of the month, `months` months later (earlier if negative)."""
    # Count months from year 0 so that crossing a year boundary is plain division.
    index = day.year * 12 + (day.month - 1) + months
    year, month0 = divmod(index, 12)
    return day.replace(year=year, month=month0 + 1)
