from tinysemver.ranges import Range, max_satisfying


def test_caret_below_one_pins_the_minor_version():
    assert "0.2.9" in Range("^0.2.3")
    assert "0.3.0" not in Range("^0.2.3")
    assert "1.0.0" not in Range("^0.2.3")


def test_caret_below_zero_one_pins_the_patch_version():
    assert "0.0.3" in Range("^0.0.3")
    assert "0.0.4" not in Range("^0.0.3")


def test_caret_from_one_allows_minor_updates():
    assert "1.9.0" in Range("^1.2.3")
    assert "2.0.0" not in Range("^1.2.3")


def test_max_satisfying_does_not_cross_a_breaking_zero_minor():
    published = ["0.4.0", "0.4.7", "0.5.0", "0.6.1"]
    assert str(max_satisfying(published, "^0.4.2")) == "0.4.7"
