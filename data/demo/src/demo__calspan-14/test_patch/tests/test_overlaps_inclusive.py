from datetime import date

from calspan.span import DateSpan


def test_spans_sharing_a_boundary_day_overlap():
    first = DateSpan(date(2024, 7, 1), date(2024, 7, 10))
    second = DateSpan(date(2024, 7, 10), date(2024, 7, 20))
    assert first.overlaps(second)
    assert second.overlaps(first)
    assert first.intersection(second) == DateSpan(date(2024, 7, 10), date(2024, 7, 10))


def test_one_day_span_overlaps_itself():
    day = DateSpan(date(2024, 7, 4), date(2024, 7, 4))
    assert day.overlaps(day)
    assert len(day.intersection(day)) == 1


def test_adjacent_spans_do_not_overlap():
    first = DateSpan(date(2024, 7, 1), date(2024, 7, 9))
    second = DateSpan(date(2024, 7, 10), date(2024, 7, 20))
    assert not first.overlaps(second)
    assert first.intersection(second) is None
