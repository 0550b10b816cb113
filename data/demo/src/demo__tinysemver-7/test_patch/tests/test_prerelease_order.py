from tinysemver.version import Version


def test_prerelease_sorts_before_its_release():
    assert Version.parse("1.0.0-rc.1") < Version.parse("1.0.0")
    assert Version.parse("1.0.0") > Version.parse("1.0.0-alpha")


def test_latest_of_mixed_list_is_the_release():
    versions = [Version.parse(v) for v in ["2.1.0-beta", "2.0.0", "2.1.0", "2.1.0-alpha"]]
    assert str(max(versions)) == "2.1.0"
    assert [str(v) for v in sorted(versions)] == ["2.0.0", "2.1.0-alpha", "2.1.0-beta", "2.1.0"]


def test_prerelease_still_above_previous_release():
    assert Version.parse("2.0.0-alpha") > Version.parse("1.9.9")
