"""Named plug-ins: the one mechanism behind every `kind`-style config key.

A reward kind, an advantage estimator, a policy loss, a weight transport and a metrics logger
are each one class or function that registers itself under a name with its package's
`Registry`; the config key that picks one (`reward.kind`, `learner.advantage`, `learner.loss`,
`trainer.weight_transport`, `trainer.loggers`) takes its accepted values from that registry,
so adding a plug-in edits nothing else. veRL's `register_adv_est` / `register_policy_loss` are
the model: a name registered twice is an error (two files silently fighting over a name is a
bug), and an unknown name is a one-line error that lists the registered ones.

Standard library only: the reward package and the config schema import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from conf.errors import UserError

T = TypeVar("T")


class RegistryError(UserError, KeyError):
    """An unknown or duplicate name; the message names it and the registered ones."""

    def __str__(self) -> str:  # KeyError quotes its message; this one is a sentence
        return str(self.args[0])


class Registry(Generic[T]):
    """Name -> plug-in (a class or a function) for one kind of plug-in, e.g. "reward kind"."""

    def __init__(self, what: str, key: str) -> None:
        self.what = what  # in messages: "reward kind"
        self.key = key  # the config key that selects one: "reward.kind"
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: `@REWARDS.register("similarity")` above a class or function."""

        def add(item: T) -> T:
            if name in self._items:
                raise RegistryError(f"{self.what} {name!r} is registered twice ({self._items[name]!r} and {item!r})")
            self._items[name] = item
            return item

        return add

    def unregister(self, name: str) -> None:
        """Remove a name (tests that register a toy plug-in clean up with this)."""
        self._items.pop(name, None)

    def get(self, name: str) -> T:
        if name not in self._items:
            raise RegistryError(f"{self.key}={name!r}: unknown {self.what}; registered: {', '.join(self.names())}")
        return self._items[name]

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items
