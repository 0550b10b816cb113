from decimal import Decimal

from moneyfmt.format import format_money


def test_yen_has_no_decimals():
    assert format_money(Decimal("1500"), "JPY") == "¥1,500"
    assert format_money(Decimal("1234.5"), "jpy") == "¥1,235"


def test_won_is_known_and_has_no_decimals():
    assert format_money(Decimal("25000"), "KRW") == "₩25,000"


def test_two_decimal_currencies_unchanged():
    assert format_money(Decimal("1500"), "USD") == "$1,500.00"
    assert format_money(Decimal("1500"), "EUR") == "1.500,00 €"
