"""A token-bucket rate limiter: `rate` tokens per second, bursts of up to `capacity`."""

from __future__ import annotations

import threading

from tokenbucket.clock import MonotonicClock


class TokenBucket:
    def __init__(self, rate: float, capacity: int, clock: object | None = None) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.rate = rate
        self.capacity = capacity
        self._clock = clock if clock is not None else MonotonicClock()
        self._tokens = float(capacity)
        self._last = self._clock.now()
        # Callers share one bucket across threads (one per API key, say).
        self._lock = threading.Lock()

    def _check_request(self, tokens: int) -> None:
        # More than `capacity` can never be available at once: refusing (or quoting a wait)
        # would leave the caller retrying forever.
        if tokens > self.capacity:
            raise ValueError(
                f"cannot acquire {tokens} tokens from a bucket of capacity {self.capacity}"
            )

    def _refill(self) -> None:
        now = self._clock.now()
        # Tokens that would overflow the bucket are lost: an idle period must not buy a
        # burst larger than `capacity`.
        self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def try_acquire(self, tokens: int = 1) -> bool:
        """Take `tokens` if they are available now; never blocks."""
        self._check_request(tokens)
        with self._lock:
            self._refill()
            if self._tokens >= tokens:
                self._tokens -= tokens
                return True
            return False

    def wait_time(self, tokens: int = 1) -> float:
        """Seconds until `tokens` could be taken (0.0 if they can be now)."""
        self._check_request(tokens)
        with self._lock:
            self._refill()
            return max(0.0, (tokens - self._tokens) / self.rate)

    @property
    def available(self) -> float:
        with self._lock:
            self._refill()
            return self._tokens
