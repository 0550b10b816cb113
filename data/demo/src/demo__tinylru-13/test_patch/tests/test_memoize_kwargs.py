from tinylru.memoize import memoize


def test_keyword_arguments_are_part_of_the_key():
    @memoize(maxsize=16)
    def convert(amount, currency="USD"):
        return f"{amount} {currency}"

    assert convert(10) == "10 USD"
    assert convert(10, currency="EUR") == "10 EUR"
    assert convert(10, currency="GBP") == "10 GBP"


def test_keyword_order_does_not_matter():
    calls = []

    @memoize(maxsize=16)
    def area(*, width, height):
        calls.append((width, height))
        return width * height

    assert area(width=2, height=3) == 6
    assert area(height=3, width=2) == 6
    assert area(width=3, height=2) == 6
    assert calls == [(2, 3), (3, 2)]


def test_positional_and_keyword_calls_do_not_collide():
    @memoize(maxsize=16)
    def pair(*args, **kwargs):
        return (args, kwargs)

    assert pair(1, "b", 2) == ((1, "b", 2), {})
    assert pair(1, b=2) == ((1,), {"b": 2})
