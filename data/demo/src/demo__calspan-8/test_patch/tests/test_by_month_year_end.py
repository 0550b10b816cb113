from datetime import date

from calspan.months import add_months
from calspan.span import DateSpan


def test_span_across_new_year_is_split_per_month():
    span = DateSpan(date(2023, 11, 20), date(2024, 1, 10))
    assert span.by_month() == [
        DateSpan(date(2023, 11, 20), date(2023, 11, 30)),
        DateSpan(date(2023, 12, 1), date(2023, 12, 31)),
        DateSpan(date(2024, 1, 1), date(2024, 1, 10)),
    ]


def test_span_ending_in_december():
    pieces = DateSpan(date(2024, 12, 5), date(2024, 12, 31)).by_month()
    assert pieces == [DateSpan(date(2024, 12, 5), date(2024, 12, 31))]
    assert sum(len(p) for p in pieces) == 27


def test_month_arithmetic_unchanged():
    assert add_months(date(2024, 1, 31), 1) == date(2024, 2, 29)
    last = DateSpan(date(2024, 2, 10), date(2024, 3, 5)).by_month()[-1]
    assert last == DateSpan(date(2024, 3, 1), date(2024, 3, 5))
