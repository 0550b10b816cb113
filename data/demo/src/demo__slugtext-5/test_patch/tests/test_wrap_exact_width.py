from slugtext.wrap import fill, wrap


def test_line_of_exactly_width_characters_is_kept():
    assert wrap("aaa bbb", width=7) == ["aaa bbb"]
    assert wrap("aaa bbb ccc", width=7) == ["aaa bbb", "ccc"]


def test_every_line_is_as_full_as_allowed():
    text = "the quick brown fox jumps over the lazy dog"
    lines = wrap(text, width=15)
    assert lines == ["the quick brown", "fox jumps over", "the lazy dog"]
    assert all(len(line) <= 15 for line in lines)


def test_fill_with_indent():
    assert fill("one two three four", width=11, indent="  ") == "  one two\n  three\n  four"


def test_long_word_gets_its_own_line():
    assert wrap("a supercalifragilistic b", width=5) == ["a", "supercalifragilistic", "b"]
