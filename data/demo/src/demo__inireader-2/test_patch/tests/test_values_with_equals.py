import pytest

from inireader.parser import ParseError, parse

CONFIG = """
[upstream]
url = https://api.example.com/v2/items?page=1&size=50
token = c2VjcmV0LXRva2Vu==
empty =
"""


def test_value_may_contain_equals_signs():
    upstream = parse(CONFIG)["upstream"]
    assert upstream["url"] == "https://api.example.com/v2/items?page=1&size=50"
    assert upstream["token"] == "c2VjcmV0LXRva2Vu=="
    assert upstream["empty"] == ""


def test_line_without_equals_is_still_an_error():
    with pytest.raises(ParseError, match="line 3"):
        parse("[a]\nx = 1\njust words\n")
