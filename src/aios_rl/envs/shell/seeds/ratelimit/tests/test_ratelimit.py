import pytest

from ratelimit import ManualClock, SlidingWindowLimiter, TokenBucket


def test_advance_moves_time():
    clock = ManualClock(5.0)
    clock.advance(2.5)
    assert clock() == 7.5


def test_advance_zero_is_allowed():
    clock = ManualClock(1.0)
    clock.advance(0)
    assert clock() == 1.0


def test_advance_rejects_negative():
    with pytest.raises(ValueError):
        ManualClock().advance(-1)


def test_token_bucket_rejects_zero_rate():
    with pytest.raises(ValueError):
        TokenBucket(5, 0, ManualClock())


def test_token_bucket_rejects_zero_capacity():
    with pytest.raises(ValueError):
        TokenBucket(0, 1, ManualClock())


def test_token_bucket_capacity_one_allowed():
    assert TokenBucket(1, 1, ManualClock()).available() == 1


def test_available_starts_full():
    assert TokenBucket(5, 1, ManualClock()).available() == 5


def test_available_initial_capped():
    assert TokenBucket(5, 1, ManualClock(), initial=9).available() == 5


def test_available_refills_over_time():
    clock = ManualClock()
    bucket = TokenBucket(10, 2, clock, initial=0)
    clock.advance(1.5)
    assert bucket.available() == 3


def test_available_refills_fraction_of_second():
    clock = ManualClock()
    bucket = TokenBucket(10, 2, clock, initial=0)
    clock.advance(0.5)
    assert bucket.available() == 1


def test_available_never_exceeds_capacity():
    clock = ManualClock()
    bucket = TokenBucket(4, 1, clock, initial=3)
    clock.advance(100)
    assert bucket.available() == 4


def test_try_acquire_takes_tokens():
    bucket = TokenBucket(3, 1, ManualClock())
    assert bucket.try_acquire(2)
    assert bucket.available() == 1


def test_try_acquire_default_one_token():
    bucket = TokenBucket(3, 1, ManualClock())
    assert bucket.try_acquire()
    assert bucket.available() == 2


def test_try_acquire_exact_remaining():
    bucket = TokenBucket(3, 1, ManualClock())
    assert bucket.try_acquire(3)
    assert not bucket.try_acquire(1)


def test_try_acquire_fails_without_consuming():
    bucket = TokenBucket(3, 1, ManualClock(), initial=1)
    assert not bucket.try_acquire(2)
    assert bucket.available() == 1


def test_try_acquire_over_capacity():
    assert not TokenBucket(3, 1, ManualClock()).try_acquire(4)


def test_try_acquire_after_refill():
    clock = ManualClock()
    bucket = TokenBucket(2, 0.5, clock, initial=0)
    clock.advance(2)
    assert bucket.try_acquire(1)
    assert not bucket.try_acquire(1)


def test_wait_time_zero_when_available():
    assert TokenBucket(3, 1, ManualClock()).wait_time(3) == 0.0


def test_wait_time_partial():
    bucket = TokenBucket(10, 4, ManualClock(), initial=1)
    assert bucket.wait_time(3) == 0.5


def test_wait_time_default_one_token():
    assert TokenBucket(5, 2, ManualClock(), initial=0).wait_time() == 0.5


def test_wait_time_small_shortfall():
    assert TokenBucket(2, 1, ManualClock(), initial=0.75).wait_time(1) == 0.25


def test_wait_time_above_capacity():
    assert TokenBucket(2, 1, ManualClock()).wait_time(3) == float("inf")


def test_sliding_window_rejects_bad_limit():
    with pytest.raises(ValueError):
        SlidingWindowLimiter(0, 1, ManualClock())


def test_sliding_window_rejects_zero_window():
    with pytest.raises(ValueError):
        SlidingWindowLimiter(1, 0, ManualClock())


def test_sliding_window_short_window_allowed():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(1, 0.5, clock)
    assert limiter.allow("k")
    clock.advance(0.5)
    assert limiter.allow("k")


def test_allow_up_to_limit():
    limiter = SlidingWindowLimiter(2, 10, ManualClock())
    assert [limiter.allow("u") for _ in range(3)] == [True, True, False]


def test_allow_keys_independent():
    limiter = SlidingWindowLimiter(1, 10, ManualClock())
    assert limiter.allow("a")
    assert limiter.allow("b")
    assert not limiter.allow("a")


def test_allow_after_window_passes():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(1, 10, clock)
    limiter.allow("u")
    clock.advance(10)
    assert limiter.allow("u")


def test_allow_just_before_window_end():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(1, 10, clock)
    limiter.allow("u")
    clock.advance(9.5)
    assert not limiter.allow("u")


def test_remaining_counts_down():
    limiter = SlidingWindowLimiter(3, 5, ManualClock())
    limiter.allow("k")
    assert limiter.remaining("k") == 2


def test_remaining_fresh_key():
    assert SlidingWindowLimiter(4, 5, ManualClock()).remaining("new") == 4


def test_remaining_never_negative_after_rejections():
    limiter = SlidingWindowLimiter(1, 5, ManualClock())
    limiter.allow("k")
    limiter.allow("k")
    assert limiter.remaining("k") == 0


def test_reset_at_when_free_is_now():
    clock = ManualClock(3.0)
    assert SlidingWindowLimiter(2, 5, clock).reset_at("k") == 3.0


def test_reset_at_when_full():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(2, 5, clock)
    limiter.allow("k")
    clock.advance(1)
    limiter.allow("k")
    assert limiter.reset_at("k") == 5.0
