import pytest

from tokenbucket.bucket import TokenBucket
from tokenbucket.clock import ManualClock


def test_request_above_capacity_is_an_error():
    bucket = TokenBucket(rate=10.0, capacity=3, clock=ManualClock())
    with pytest.raises(ValueError, match="capacity 3"):
        bucket.try_acquire(5)
    with pytest.raises(ValueError, match="capacity 3"):
        bucket.wait_time(5)


def test_request_of_exactly_capacity_is_allowed():
    clock = ManualClock()
    bucket = TokenBucket(rate=1.0, capacity=3, clock=clock)
    assert bucket.try_acquire(3)
    assert bucket.wait_time(3) == 3.0
    clock.advance(3)
    assert bucket.try_acquire(3)
