from tokenbucket.bucket import TokenBucket
from tokenbucket.clock import ManualClock


def test_idle_bucket_refills_only_up_to_capacity():
    clock = ManualClock()
    bucket = TokenBucket(rate=2.0, capacity=5, clock=clock)
    clock.advance(3600)
    assert bucket.available == 5
    granted = sum(bucket.try_acquire() for _ in range(20))
    assert granted == 5


def test_partial_refill_is_unchanged():
    clock = ManualClock()
    bucket = TokenBucket(rate=1.0, capacity=4, clock=clock)
    assert all(bucket.try_acquire() for _ in range(4))
    clock.advance(2.5)
    assert bucket.available == 2.5
    assert bucket.wait_time(4) == 1.5
