from tinylru.cache import LRUCache
from tinylru.memoize import memoize


def test_none_result_is_computed_once():
    calls = []

    @memoize(maxsize=8)
    def find_user(name):
        calls.append(name)
        return None

    for _ in range(3):
        assert find_user("ghost") is None
    assert calls == ["ghost"]
    assert find_user.cache.info()["hits"] == 2


def test_get_returns_default_on_miss():
    cache = LRUCache(maxsize=2)
    marker = object()
    assert cache.get("nope", marker) is marker
    cache.put("none", None)
    assert cache.get("none", marker) is None
    assert cache.get("nope") is None
