from slugtext.slug import slugify, unique_slug


def test_accents_are_transliterated():
    assert slugify("Crème brûlée") == "creme-brulee"
    assert slugify("Ångström Café") == "angstrom-cafe"
    assert slugify("Ｆｕｌｌｗｉｄｔｈ １２３") == "fullwidth-123"


def test_unique_slug_of_accented_title():
    assert unique_slug("Éclair", {"eclair"}) == "eclair-2"


def test_plain_ascii_unchanged():
    assert slugify("Hello, World!") == "hello-world"
    assert slugify("A long title here", max_length=8) == "a-long"
