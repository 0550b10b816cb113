"""Format monetary amounts for display: rounding, digit grouping and the currency symbol."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from moneyfmt.currencies import get_currency

Amount = Decimal | int | float | str


def group_digits(digits: str, sep: str = ",") -> str:
    """'1234567' -> '1,234,567'."""
    groups: list[str] = []
    while len(digits) > 3:
        groups.insert(0, digits[-3:])
        digits = digits[:-3]
    groups.insert(0, digits)
    return sep.join(groups)


def format_amount(amount: Amount, places: int = 2, sep: str = ",", point: str = ".") -> str:
    """1234.5 -> '1,234.50': rounded to `places` decimals, thousands grouped."""
    # Decimal all the way: float(2.675) is 2.67499..., and round() rounds half to even, but
    # invoices round half away from zero. str() first so that a float keeps its short form.
    value = Decimal(str(amount)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    text = f"{value:f}"
    whole, _, frac = text.partition(".")
    whole = group_digits(whole, sep)
    return whole + point + frac if frac else whole


def format_money(amount: Amount, code: str) -> str:
    """Decimal("1234.5"), "USD" -> '$1,234.50'; "EUR" -> '1.234,50 €'."""
    currency = get_currency(code)
    if currency.symbol_first:
        return currency.symbol + format_amount(amount)
    # Euro amounts are shown the continental way: dot for thousands, comma for decimals.
    return format_amount(amount, sep=".", point=",") + " " + currency.symbol
