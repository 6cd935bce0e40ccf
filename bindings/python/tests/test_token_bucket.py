import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import weir
from reference import GcraModel, ns


def check(d, m):
    assert bool(d) == m.allowed == d.allowed
    assert d.remaining == m.remaining
    assert d.retry_after_ns == m.retry_after
    assert d.retry_after == m.retry_after / 1e9
    assert d.delay == 0.0
    if m.allowed:
        assert d.retry_after == 0.0


def test_three_per_second_exact():
    c = weir.ManualClock()
    tb = weir.TokenBucket(3, 1.0, 3, clock=c)
    assert [tb.try_acquire().allowed for _ in range(4)] == [True, True, True, False]
    d = tb.try_acquire()
    assert not d and d.retry_after_ns == 333_333_334 and d.remaining == 0
    c.advance(d.retry_after)
    assert tb.try_acquire()
    # Exactly burst + 3·s admissions in s seconds from full.
    tb = weir.TokenBucket(3, 1.0, 3, clock=weir.ManualClock())
    r = weir.replay(tb, [i * 1e-4 for i in range(100_001)])  # 10 s, 10 kHz arrivals
    assert r.admitted == 3 + 30


def test_defaults_and_repr():
    tb = weir.TokenBucket(rate=10, per=1.0, burst=5)
    assert tb.clock is None
    assert (tb.rate, tb.per, tb.burst, tb.capacity) == (10, 1.0, 5, 5)
    assert repr(tb) == "TokenBucket(rate=10, per=1.0, burst=5, remaining=5, clock=monotonic)"
    c = weir.ManualClock(2.0)
    tb = weir.TokenBucket(10, 1.0, 5, clock=c)
    assert tb.clock is c
    assert "ManualClock(now=2.0)" in repr(tb)
    d = tb.try_acquire()
    assert repr(d) == "Decision(allowed=True, remaining=4, retry_after=0.0)"


@pytest.mark.parametrize(
    "kw, exc, name",
    [
        (dict(rate=0, per=1.0, burst=1), ValueError, "rate"),
        (dict(rate=1, per=0.0, burst=1), ValueError, "per"),
        (dict(rate=1, per=1.0, burst=0), ValueError, "burst"),
        (dict(rate=-1, per=1.0, burst=1), ValueError, "rate"),
        (dict(rate=1, per=-1.0, burst=1), ValueError, "per"),
        (dict(rate=1, per=float("nan"), burst=1), ValueError, "per"),
        (dict(rate=1.5, per=1.0, burst=1), TypeError, "rate"),
        (dict(rate=1, per="1s", burst=1), TypeError, "per"),
        (dict(rate=1, per=1.0, burst="2"), TypeError, "burst"),
        (dict(rate=2**64, per=1.0, burst=1), ValueError, "rate"),
        (dict(rate=1, per=3600.0, burst=2**40), ValueError, "burst"),
    ],
)
def test_bad_arguments(kw, exc, name):
    with pytest.raises(exc, match=name):
        weir.TokenBucket(**kw)


def test_cost_validation():
    tb = weir.TokenBucket(1, 1.0, 5, clock=weir.ManualClock())
    with pytest.raises(weir.InsufficientCapacity) as e:
        tb.try_acquire(6)
    assert (e.value.cost, e.value.capacity) == (6, 5)
    assert isinstance(e.value, ValueError)
    with pytest.raises(ValueError, match="cost"):
        tb.try_acquire(-1)
    with pytest.raises(TypeError, match="cost"):
        tb.try_acquire(1.0)
    assert tb.try_acquire(0).remaining == 5  # a query
    assert tb.try_acquire(5)
    assert not tb.try_acquire(1)


def test_peek_refund_reset():
    c = weir.ManualClock()
    tb = weir.TokenBucket(1, 1.0, 2, clock=c)
    assert tb.peek(2).allowed and tb.peek(2).remaining == 0
    assert tb.try_acquire(2)
    assert not tb.peek()
    tb.refund(1)
    assert tb.try_acquire()
    tb.reset()
    assert tb.try_acquire(2)


events = st.lists(
    st.tuples(
        st.integers(min_value=-3_000_000_000, max_value=3_000_000_000),  # Δt in ns (rewinds too)
        st.integers(min_value=0, max_value=6),
    ),
    max_size=60,
)


@given(
    rate=st.integers(1, 1000),
    per_ms=st.integers(1, 5000),
    burst=st.integers(1, 6),
    evs=events,
)
def test_matches_rational_gcra(rate, per_ms, burst, evs):
    per_ns = per_ms * 1_000_000
    c = weir.ManualClock(start=100.0)
    tb = weir.TokenBucket(rate, per_ms / 1000, burst, clock=c)
    m = GcraModel(rate, per_ns, burst, start_ns=ns(100.0))
    now = ns(100.0)
    for dt, cost in evs:
        now = max(0, now + dt)
        c.set(now / 1e9)
        now = c.now_ns()
        if cost > burst:
            with pytest.raises(weir.InsufficientCapacity):
                tb.try_acquire(cost)
            continue
        check(tb.try_acquire(cost), m.acquire(now, cost))


def test_extreme_values():
    c = weir.ManualClock()
    tb = weir.TokenBucket(2**63, 1.0, 1, clock=c)
    assert tb.try_acquire()
    tb = weir.TokenBucket(1, 1e9, 1, clock=c)  # one per ~31.7 years
    assert tb.try_acquire()
    d = tb.try_acquire()
    assert not d and d.retry_after == 1e9
    c.set(math.inf)  # the far end of time: the bucket refills, nothing overflows
    assert isinstance(tb.try_acquire().allowed, bool)
