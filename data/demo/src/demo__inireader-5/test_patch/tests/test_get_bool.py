import pytest

from inireader.values import Config

CONFIG = Config.from_text("""
[features]
search = false
beta = No
legacy = off
zero = 0
audit = yes
cache = TRUE
typo = flase
""")


@pytest.mark.parametrize("key", ["search", "beta", "legacy", "zero"])
def test_false_words_are_false(key):
    assert CONFIG.get_bool("features", key) is False


@pytest.mark.parametrize("key", ["audit", "cache"])
def test_true_words_are_true(key):
    assert CONFIG.get_bool("features", key) is True


def test_missing_key_gives_default():
    assert CONFIG.get_bool("features", "absent") is False
    assert CONFIG.get_bool("features", "absent", default=True) is True


def test_unknown_word_is_an_error():
    with pytest.raises(ValueError, match="typo"):
        CONFIG.get_bool("features", "typo")
