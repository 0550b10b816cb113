from decimal import Decimal

from moneyfmt.format import format_amount, format_money


def test_negative_amounts_group_without_a_leading_separator():
    assert format_amount(Decimal("-123456.7")) == "-123,456.70"
    assert format_amount(Decimal("-123.4")) == "-123.40"
    assert format_amount(-1234567) == "-1,234,567.00"


def test_negative_money_in_both_symbol_positions():
    assert format_money(Decimal("-250"), "USD") == "$-250.00"
    assert format_money(Decimal("-4500.5"), "EUR") == "-4.500,50 €"


def test_positive_amounts_unchanged():
    assert format_amount(Decimal("999")) == "999.00"
    assert format_amount(Decimal("1000")) == "1,000.00"
