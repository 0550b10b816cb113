from decimal import Decimal

from moneyfmt.format import format_amount, format_money


def test_half_cent_rounds_up():
    assert format_amount(Decimal("2.675")) == "2.68"
    assert format_amount(Decimal("0.125")) == "0.13"
    assert format_money(Decimal("10.235"), "USD") == "$10.24"


def test_large_amounts_keep_every_digit():
    assert format_amount(Decimal("12345678901234567.89")) == "12,345,678,901,234,567.89"


def test_floats_and_ints_still_accepted():
    assert format_amount(1234.5) == "1,234.50"
    assert format_amount(7) == "7.00"
    assert format_money(1234.5, "EUR") == "1.234,50 €"
