"""LeakyBucket, FixedWindow, SlidingWindow, SlidingLog against the reference models."""

import math
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import weir
from reference import (
    FixedWindowModel,
    NginxModel,
    SlidingCounterModel,
    SlidingLogModel,
    ns,
)


def check(d, m):
    assert bool(d) == d.allowed == m.allowed
    assert d.remaining == m.remaining
    assert d.retry_after_ns == m.retry_after
    assert d.retry_after == m.retry_after / 1e9
    assert d.delay_ns == m.delay
    assert d.delay == m.delay / 1e9
    assert round(d.reset_after * 1e9) == m.reset_after or d.reset_after == m.reset_after / 1e9
    if d.allowed:
        assert d.retry_after == 0.0
    else:
        assert d.delay == 0.0


def run(lim, model, clock, evs, start_ns):
    """Drives `lim` and `model` through (Δt ns, cost) events, rewinds included."""
    now = start_ns
    cap = lim.capacity
    for dt, cost in evs:
        now = max(0, now + dt)
        clock.set(now / 1e9)
        now = clock.now_ns()
        if cost > cap:
            with pytest.raises(weir.InsufficientCapacity) as e:
                lim.try_acquire(cost)
            assert (e.value.cost, e.value.capacity) == (cost, cap)
            with pytest.raises(OverflowError):
                model.acquire(now, cost)
            continue
        p = lim.peek(cost)
        d = lim.try_acquire(cost)
        assert p == d
        check(d, model.acquire(now, cost))


events = st.lists(
    st.tuples(
        st.integers(min_value=-2_000_000_000, max_value=3_000_000_000),  # Δt ns, rewinds too
        st.integers(min_value=0, max_value=9),
    ),
    max_size=60,
)


# ---- LeakyBucket --------------------------------------------------------------------------


def test_leaky_bucket_nginx_example():
    # 2 r/s, burst 2, delay 1: the 1st passes, the 2nd passes (≤ delay), the 3rd waits.
    c = weir.ManualClock()
    lb = weir.LeakyBucket(2, 1.0, 2, delay=1, clock=c)
    a, b, d, r = (lb.try_acquire() for _ in range(4))
    assert a and a.delay == 0 and b and b.delay == 0
    assert d.allowed and d.delay == 0.5 and d.delay_ns == 500_000_000 and d.retry_after == 0.0
    assert repr(d) == "Decision(allowed=True, remaining=0, retry_after=0.0, delay=0.5)"
    assert not r and r.retry_after == 0.5 and r.delay == 0.0
    c.advance(0.5)
    assert lb.try_acquire().delay == 0.5


def test_leaky_bucket_burst_zero_spaces_requests():
    c = weir.ManualClock()
    lb = weir.LeakyBucket(10, 1.0, 0, clock=c)  # nginx's default burst
    assert lb.capacity == 1
    assert lb.try_acquire() and not lb.try_acquire()
    c.advance(0.1)
    assert lb.try_acquire()


def test_leaky_bucket_nodelay_and_defaults():
    c = weir.ManualClock(5.0)
    lb = weir.LeakyBucket(rate=1, per=1.0, burst=3, nodelay=True, clock=c)
    assert (lb.rate, lb.per, lb.burst, lb.delay, lb.nodelay, lb.capacity) == (1, 1.0, 3, 0, True, 4)
    assert lb.clock is c
    assert all(lb.try_acquire().delay == 0.0 for _ in range(4))
    assert not lb.try_acquire()
    assert repr(lb) == (
        "LeakyBucket(rate=1, per=1.0, burst=3, delay=0, nodelay=True, remaining=0, "
        "clock=ManualClock(now=5.0))"
    )
    lb.reset()
    assert lb.try_acquire(4)
    lb = weir.LeakyBucket(1, 1.0, 1)
    assert lb.clock is None and repr(lb).endswith("remaining=1, clock=monotonic)")


@given(
    rate=st.integers(1, 1000),
    per_ms=st.integers(1, 5000),
    burst=st.integers(0, 8),
    delay=st.integers(0, 10),
    nodelay=st.booleans(),
    evs=events,
)
def test_leaky_bucket_matches_nginx_model(rate, per_ms, burst, delay, nodelay, evs):
    c = weir.ManualClock(start=100.0)
    lb = weir.LeakyBucket(rate, per_ms / 1000, burst, delay=delay, nodelay=nodelay, clock=c)
    m = NginxModel(rate, per_ms * 1_000_000, burst, delay, nodelay, start_ns=ns(100.0))
    run(lb, m, c, evs, ns(100.0))


@pytest.mark.parametrize(
    "args, kw, exc, name",
    [
        ((0, 1.0, 1), {}, ValueError, "rate"),
        ((1, 0.0, 1), {}, ValueError, "per"),
        ((1, 1e-10, 1), {}, ValueError, "per"),
        ((1, -1.0, 1), {}, ValueError, "per"),
        ((1, float("nan"), 1), {}, ValueError, "per"),
        ((1, 1.0, -1), {}, ValueError, "burst"),
        ((1, 1.0, 1.5), {}, TypeError, "burst"),
        ((1.0, 1.0, 1), {}, TypeError, "rate"),
        ((1, 1.0, 1), {"delay": -1}, ValueError, "delay"),
        ((1, 1.0, 1), {"delay": "1"}, TypeError, "delay"),
        ((1, 1.0, 2**64 - 1), {}, ValueError, "burst"),
        ((1, 1.0, 1), {"clock": 3}, TypeError, "clock"),
    ],
)
def test_leaky_bucket_bad_arguments(args, kw, exc, name):
    with pytest.raises(exc, match=name):
        weir.LeakyBucket(*args, **kw)


# ---- windows --------------------------------------------------------------------------------


def test_fixed_window_basics():
    c = weir.ManualClock(0.9)
    fw = weir.FixedWindow(2, 1.0, clock=c)
    assert (fw.limit, fw.window, fw.capacity) == (2, 1.0, 2)
    assert fw.try_acquire(2)
    c.set(0.95)
    d = fw.try_acquire()
    assert not d and d.retry_after_ns == 50_000_000 and d.remaining == 0
    assert repr(fw) == "FixedWindow(limit=2, window=1.0, remaining=0, clock=ManualClock(now=0.95))"
    c.set(1.0)  # the boundary: a fresh window, so 2·limit within 100 ms
    assert fw.try_acquire(2)


def test_sliding_window_basics():
    c = weir.ManualClock(0.9)
    sw = weir.SlidingWindow(2, 1.0, clock=c)
    assert sw.try_acquire(2)
    c.set(1.5)  # half of the previous window still counts: ceil(2 · 0.5) = 1
    assert sw.peek(0).remaining == 1
    assert sw.try_acquire() and not sw.try_acquire()
    assert repr(sw) == "SlidingWindow(limit=2, window=1.0, remaining=0, clock=ManualClock(now=1.5))"


def test_sliding_log_basics():
    c = weir.ManualClock()
    sl = weir.SlidingLog(2, 1.0, clock=c)
    assert sl.try_acquire()
    c.set(0.6)
    assert sl.try_acquire()
    c.set(0.9)
    d = sl.try_acquire()
    assert not d and d.retry_after_ns == 100_000_000  # the event at 0 leaves at 1 s
    c.set(1.0)
    assert sl.try_acquire()
    assert repr(sl) == "SlidingLog(limit=2, window=1.0, remaining=0, ring=8, clock=ManualClock(now=1.0))"
    sl.reset()
    assert sl.try_acquire(2)


@given(limit=st.integers(1, 8), window_ms=st.integers(1, 3000), evs=events)
def test_fixed_window_matches_model(limit, window_ms, evs):
    c = weir.ManualClock(start=100.0)
    fw = weir.FixedWindow(limit, window_ms / 1000, clock=c)
    run(fw, FixedWindowModel(limit, window_ms * 1_000_000), c, evs, ns(100.0))


@given(limit=st.integers(1, 8), window_ms=st.integers(1, 3000), evs=events)
def test_sliding_window_matches_model(limit, window_ms, evs):
    c = weir.ManualClock(start=100.0)
    sw = weir.SlidingWindow(limit, window_ms / 1000, clock=c)
    run(sw, SlidingCounterModel(limit, window_ms * 1_000_000), c, evs, ns(100.0))


@given(limit=st.sampled_from([1, 2, 3, 5, 8, 9, 20, 64, 65]), window_ms=st.integers(1, 3000), evs=events)
def test_sliding_log_matches_model(limit, window_ms, evs):
    c = weir.ManualClock(start=100.0)
    sl = weir.SlidingLog(limit, window_ms / 1000, clock=c)
    run(sl, SlidingLogModel(limit, window_ms * 1_000_000), c, evs, ns(100.0))


@given(window_ns=st.integers(1, 50), evs=st.lists(st.tuples(st.integers(-20, 40), st.integers(0, 3)), max_size=80))
def test_windows_nanosecond_scale(window_ns, evs):
    """Windows of a few ns: boundaries, rewinds and off-by-ones at the finest grain."""
    for cls, model in (
        (weir.FixedWindow, FixedWindowModel),
        (weir.SlidingWindow, SlidingCounterModel),
        (weir.SlidingLog, SlidingLogModel),
    ):
        c = weir.ManualClock()
        lim = cls(3, window_ns / 1e9, clock=c)
        run(lim, model(3, window_ns), c, evs, 0)


@pytest.mark.parametrize("cls", [weir.FixedWindow, weir.SlidingWindow, weir.SlidingLog])
@pytest.mark.parametrize(
    "args, exc, name",
    [
        ((0, 1.0), ValueError, "limit"),
        ((-1, 1.0), ValueError, "limit"),
        ((1.0, 1.0), TypeError, "limit"),
        ((2**64, 1.0), ValueError, "limit"),
        ((1, 0.0), ValueError, "window"),
        ((1, 4e-10), ValueError, "window"),
        ((1, -1.0), ValueError, "window"),
        ((1, float("nan")), ValueError, "window"),
        ((1, "1s"), TypeError, "window"),
    ],
)
def test_window_bad_arguments(cls, args, exc, name):
    with pytest.raises(exc, match=name):
        cls(*args)


@pytest.mark.parametrize(
    "cls, top", [(weir.FixedWindow, 2**32 - 1), (weir.SlidingWindow, 2**24 - 1), (weir.SlidingLog, 32768)]
)
def test_window_limit_bounds(cls, top):
    c = weir.ManualClock()
    lim = cls(top, 1.0, clock=c)
    assert lim.capacity == top
    assert lim.try_acquire(top).remaining == 0
    assert not lim.try_acquire()
    with pytest.raises(weir.InsufficientCapacity):
        lim.try_acquire(top + 1)
    with pytest.raises(ValueError, match="limit must be <= %d" % top):
        cls(top + 1, 1.0)
    assert weir.MAX_SLIDING_LOG_LIMIT == 32768


@pytest.mark.parametrize("limit", [1, 8, 9, 64, 65, 512, 513, 4096, 4097, 32768])
def test_sliding_log_ring_sizes(limit):
    c = weir.ManualClock()
    sl = weir.SlidingLog(limit, 1.0, clock=c)
    ring = int(repr(sl).split("ring=")[1].split(",")[0])
    assert limit <= ring <= max(8, 8 * limit)
    r = weir.replay(sl, [i / (2 * limit) for i in range(4 * limit)])  # 2 windows at 2× the rate
    assert r.admitted == 2 * limit


# ---- extremes, rewinds, threads ---------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda c: weir.LeakyBucket(1, 1e9, 2, delay=1, clock=c),
        lambda c: weir.LeakyBucket(2**62, 1.0, 0, clock=c),
        lambda c: weir.FixedWindow(3, 1e9, clock=c),
        lambda c: weir.FixedWindow(3, 1e-9, clock=c),
        lambda c: weir.SlidingWindow(3, 1e9, clock=c),
        lambda c: weir.SlidingWindow(3, 1e-9, clock=c),
        lambda c: weir.SlidingLog(3, 1e9, clock=c),
        lambda c: weir.SlidingLog(3, math.inf, clock=c),
    ],
)
def test_extreme_times_never_overflow(make):
    c = weir.ManualClock()
    lim = make(c)
    seen = []
    for t in [0.0, 1e-9, 1e9, 5e8, math.inf, 0.0, 1.8e10, math.inf]:
        c.set(t)
        for cost in (0, 1, lim.capacity):
            d = lim.try_acquire(cost)
            assert isinstance(d.allowed, bool)
            assert 0 <= d.remaining <= lim.capacity
            assert 0.0 <= d.retry_after <= 2**64 / 1e9 and 0.0 <= d.delay <= 2**64 / 1e9
            seen.append(d.allowed)
    assert any(seen)


@pytest.mark.parametrize(
    "make",
    [
        lambda c: weir.LeakyBucket(5, 1.0, 4, delay=2, clock=c),
        lambda c: weir.FixedWindow(5, 1.0, clock=c),
        lambda c: weir.SlidingWindow(5, 1.0, clock=c),
        lambda c: weir.SlidingLog(5, 1.0, clock=c),
    ],
)
def test_rewind_never_grants_capacity(make):
    c = weir.ManualClock(10.0)
    lim = make(c)
    while lim.try_acquire():
        pass
    for back in (9.999, 9.0, 5.0, 0.0):
        c.set(back)
        assert not lim.try_acquire()


@pytest.mark.parametrize(
    "make, cap",
    [
        (lambda c: weir.TokenBucket(1, 1.0, 10_000, clock=c), 10_000),
        (lambda c: weir.LeakyBucket(1, 1.0, 9_999, nodelay=True, clock=c), 10_000),
        (lambda c: weir.FixedWindow(10_000, 1.0, clock=c), 10_000),
        (lambda c: weir.SlidingWindow(10_000, 1.0, clock=c), 10_000),
        (lambda c: weir.SlidingLog(10_000, 1.0, clock=c), 10_000),
    ],
)
def test_threads_share_one_limiter(make, cap):
    lim = make(weir.ManualClock())
    got = []

    def worker():
        got.append(sum(1 for _ in range(5000) if lim.try_acquire()))

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sum(got) == cap
