"""The ISO 4217 currencies the formatter knows: symbol, minor units, where the symbol goes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Currency:
    code: str
    symbol: str
    # Digits after the decimal point in everyday amounts (cents: 2).
    minor_units: int = 2
    # "$5.00" versus "5,00 €".
    symbol_first: bool = True


CURRENCIES: dict[str, Currency] = {
    c.code: c
    for c in (
        Currency("USD", "$"),
        Currency("GBP", "£"),
        Currency("EUR", "€", symbol_first=False),
        Currency("CHF", "CHF "),
        Currency("JPY", "¥"),
    )
}


def get_currency(code: str) -> Currency:
    try:
        return CURRENCIES[code.upper()]
    except KeyError:
        raise KeyError(f"unknown currency code {code!r}; known: {sorted(CURRENCIES)}") from None
