"""`@memoize(maxsize=...)`: cache a function's results, keyed by its arguments, in an LRUCache."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from tinylru.cache import LRUCache

F = TypeVar("F", bound=Callable[..., Any])

# None (or 0, or "") is a result worth caching too; only this object means "not cached".
_MISSING = object()


# Separates positional from keyword arguments in a key, so that f(1, "b", 2) and f(1, b=2)
# get different entries.
_KWARGS_MARK = object()


def _make_key(args: tuple, kwargs: dict) -> tuple:
    if not kwargs:
        return args
    # Sorted: f(x, a=1, b=2) and f(x, b=2, a=1) are the same call.
    return args + (_KWARGS_MARK,) + tuple(sorted(kwargs.items()))


def memoize(maxsize: int = 128) -> Callable[[F], F]:
    """Each decorated function gets its own cache, exposed as `func.cache`."""

    def decorate(func: F) -> F:
        cache = LRUCache(maxsize)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = _make_key(args, kwargs)
            result = cache.get(key, _MISSING)
            if result is _MISSING:
                result = func(*args, **kwargs)
                cache.put(key, result)
            return result

        wrapper.cache = cache  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
