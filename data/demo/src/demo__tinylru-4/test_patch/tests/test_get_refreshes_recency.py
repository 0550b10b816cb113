from tinylru.cache import LRUCache


def test_recently_read_entry_survives_eviction():
    cache = LRUCache(maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert "a" in cache
    assert "b" not in cache
    assert cache.get("c") == 3


def test_hot_key_read_in_a_loop_is_never_evicted():
    cache = LRUCache(maxsize=3)
    cache.put("config", {"debug": False})
    for i in range(10):
        assert cache.get("config") == {"debug": False}
        cache.put(i, i * i)
    assert "config" in cache
    assert cache.info() == {"hits": 10, "misses": 0, "size": 3, "maxsize": 3}
