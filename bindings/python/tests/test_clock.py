import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import weir
from reference import ns


def test_manual_clock_basics():
    c = weir.ManualClock()
    assert c.now() == 0.0
    c.advance(0.25)
    assert c.now() == 0.25
    c.set(10)
    assert c.now_ns() == 10_000_000_000
    c.set(1.5)  # rewinds are allowed
    assert c.now() == 1.5
    assert repr(c) == "ManualClock(now=1.5)"
    assert weir.ManualClock(start=3.0).now() == 3.0


@pytest.mark.parametrize("bad", [-1.0, -1e-12, float("nan"), -math.inf])
def test_manual_clock_rejects(bad):
    with pytest.raises(ValueError, match="start"):
        weir.ManualClock(start=bad)
    c = weir.ManualClock()
    with pytest.raises(ValueError, match="seconds"):
        c.advance(bad)
    with pytest.raises(ValueError, match="seconds"):
        c.set(bad)


def test_manual_clock_type_errors():
    with pytest.raises(TypeError):
        weir.ManualClock(start="1")


def test_saturation_at_the_far_end():
    c = weir.ManualClock()
    c.set(math.inf)
    assert c.now_ns() == 2**64 - 1
    c.advance(1.0)
    assert c.now_ns() == 2**64 - 1
    c.set(1e300)
    assert c.now_ns() == 2**64 - 1


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False))
def test_rounding_to_nearest_ns(s):
    c = weir.ManualClock(start=s)
    assert c.now_ns() == ns(s)


def test_half_ns_rounds_away_from_zero():
    assert weir.ManualClock(start=0.5e-9).now_ns() == 1
    assert weir.ManualClock(start=0.49e-9).now_ns() == 0


def test_insufficient_capacity_is_value_error():
    assert issubclass(weir.InsufficientCapacity, ValueError)


def test_clock_argument_type():
    with pytest.raises(TypeError, match="clock"):
        weir.TokenBucket(1, 1.0, 1, clock=object())


@pytest.mark.parametrize(
    "x_ns",
    [0.5, 1.5, 2.5, 2.4999999, 12345.5, 2.0**52 - 0.5, 2.0**52 - 1.5, 2.0**52 - 1, 2.0**52,
     2.0**52 + 1, 2.0**53 + 2, 2.0**63, 2.0**64 - 2048, 2.0**64, 1e300, math.inf],
)
def test_rounding_ties_and_the_fast_path_boundary(x_ns):
    # seconds whose product with 1e9 is exactly x_ns where representable; the clock, a
    # replayed event (which leaves the clock at its time) and the reference agree.
    s = x_ns / 1e9
    assert weir.ManualClock(start=s).now_ns() == ns(s)
    c = weir.ManualClock()
    weir.replay(weir.TokenBucket(1, 1.0, 1, clock=c), [s])
    assert c.now_ns() == ns(s)


@given(st.floats(min_value=0, allow_nan=False))
def test_rounding_any_double(s):
    c = weir.ManualClock()
    weir.replay(weir.TokenBucket(1, 1.0, 1, clock=c), [s])
    assert c.now_ns() == ns(s) == weir.ManualClock(start=s).now_ns()
