from datetime import date

import pytest

from calspan.months import add_months


@pytest.mark.parametrize(
    ("day", "months", "expected"),
    [
        (date(2024, 1, 31), 1, date(2024, 2, 29)),
        (date(2023, 1, 31), 1, date(2023, 2, 28)),
        (date(2024, 3, 31), -1, date(2024, 2, 29)),
        (date(2024, 5, 31), 1, date(2024, 6, 30)),
        (date(2024, 2, 29), 12, date(2025, 2, 28)),
    ],
)
def test_day_is_clamped_to_the_end_of_a_shorter_month(day, months, expected):
    assert add_months(day, months) == expected


def test_ordinary_days_and_year_crossings_unchanged():
    assert add_months(date(2023, 12, 15), 1) == date(2024, 1, 15)
    assert add_months(date(2024, 1, 15), -13) == date(2022, 12, 15)
