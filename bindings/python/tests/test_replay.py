import array
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

import weir
from reference import GcraModel


def test_replay_equals_single_calls():
    ts = [0.0, 0.1, 0.1, 0.2, 0.05, 1.0, 1.0, 1.0, 3.0]
    costs = [1, 2, 1, 1, 1, 3, 1, 0, 2]
    a = weir.TokenBucket(2, 1.0, 3, clock=weir.ManualClock())
    r = weir.replay(a, ts, costs)
    b = weir.TokenBucket(2, 1.0, 3, clock=weir.ManualClock())
    for i, (t, k) in enumerate(zip(ts, costs)):
        b.clock.set(t)
        d = b.try_acquire(k)
        assert r[i] == (d.allowed, d.remaining, d.retry_after, d.delay)
    assert a.clock.now() == 3.0
    assert r.admitted == sum(r.allowed) and r.rejected == len(ts) - r.admitted
    assert repr(r).startswith("ReplayResult(events=9")


@given(st.lists(st.integers(0, 10**10), max_size=200), st.integers(1, 5))
def test_replay_matches_model(ts_ns, burst):
    tb = weir.TokenBucket(7, 1.0, burst, clock=weir.ManualClock())
    r = weir.replay(tb, [t / 1e9 for t in ts_ns])
    m = GcraModel(7, 10**9, burst)
    for i, t in enumerate(ts_ns):
        d = m.acquire(round(t / 1e9 * 1e9))
        assert r.allowed[i] == d.allowed
        assert r.remaining[i] == d.remaining
        assert r.retry_after[i] == d.retry_after / 1e9


def test_input_kinds():
    ts = [0.0, 0.5, 1.0]
    for kind in (ts, tuple(ts), array.array("d", ts), array.array("f", ts), range(3)):
        tb = weir.TokenBucket(1, 1.0, 1, clock=weir.ManualClock())
        assert len(weir.replay(tb, kind)) == 3
    tb = weir.TokenBucket(1, 1.0, 2, clock=weir.ManualClock())
    r = weir.replay(tb, ts, array.array("q", [1, 1, 1]))
    assert list(r.allowed) == [True, True, True]
    assert len(weir.replay(tb, [])) == 0


def test_numpy_zero_copy_both_ways():
    np = pytest.importorskip("numpy")
    tb = weir.TokenBucket(100, 1.0, 10, clock=weir.ManualClock())
    ts = np.linspace(0, 10, 100_001)
    r = weir.replay(tb, ts, np.ones(len(ts), dtype=np.uint64))
    cols = r.to_numpy()
    assert cols["allowed"].dtype == np.bool_ and cols["allowed"].sum() == r.admitted
    assert cols["retry_after"].dtype == np.float64
    assert r.admitted == 10 + 1000
    assert tb.clock.now() == 10.0
    # a strided view and other dtypes convert by value
    assert weir.replay(weir.TokenBucket(1, 1.0, 1, clock=weir.ManualClock()), ts[::2]).admitted == 11
    r2 = weir.replay(weir.TokenBucket(1, 1.0, 1, clock=weir.ManualClock()), ts.astype(np.float32), np.ones(len(ts), dtype=np.int32))
    assert len(r2) == len(ts)


def test_bad_inputs_change_nothing():
    c = weir.ManualClock()
    tb = weir.TokenBucket(1, 1.0, 2, clock=c)
    with pytest.raises(ValueError, match=r"times\[1\]"):
        weir.replay(tb, [0.0, -1.0])
    with pytest.raises(ValueError, match=r"times\[0\]"):
        weir.replay(tb, [float("nan")])
    with pytest.raises(ValueError, match="costs"):
        weir.replay(tb, [0.0, 1.0], [1])
    with pytest.raises(ValueError, match="costs"):
        weir.replay(tb, [0.0], [-1])
    with pytest.raises(weir.InsufficientCapacity) as e:
        weir.replay(tb, [0.0, 1.0], [1, 3])
    assert e.value.index == 1
    with pytest.raises(TypeError, match="times"):
        weir.replay(tb, b"\x00" * 8)
    with pytest.raises(TypeError, match="times"):
        weir.replay(tb, ["a"])
    with pytest.raises(TypeError, match="limiter"):
        weir.replay(object(), [0.0])
    with pytest.raises(ValueError, match="ManualClock"):
        weir.replay(weir.TokenBucket(1, 1.0, 1), [0.0])
    assert c.now() == 0.0 and tb.try_acquire(2)


MAKERS = {
    "TokenBucket": lambda c: weir.TokenBucket(3, 1.0, 4, clock=c),
    "LeakyBucket": lambda c: weir.LeakyBucket(3, 1.0, 4, delay=1, clock=c),
    "LeakyBucket nodelay": lambda c: weir.LeakyBucket(3, 1.0, 4, nodelay=True, clock=c),
    "FixedWindow": lambda c: weir.FixedWindow(4, 1.0, clock=c),
    "SlidingWindow": lambda c: weir.SlidingWindow(4, 1.0, clock=c),
    "SlidingLog": lambda c: weir.SlidingLog(4, 1.0, clock=c),
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
@given(
    evs=st.lists(st.tuples(st.integers(0, 3_000_000_000), st.integers(0, 4)), max_size=120),
    with_costs=st.booleans(),
)
def test_replay_equals_single_calls_every_limiter(kind, evs, with_costs):
    """replay(trace) == the same try_acquire calls, decision by decision (rewinds included:
    the times are unsorted)."""
    ts = [t / 1e9 for t, _ in evs]
    costs = [k for _, k in evs] if with_costs else None
    a = MAKERS[kind](weir.ManualClock())
    r = weir.replay(a, ts, costs)
    b = MAKERS[kind](weir.ManualClock())
    for i, t in enumerate(ts):
        b.clock.set(t)
        d = b.try_acquire(costs[i]) if costs else b.try_acquire()
        assert r[i] == (d.allowed, d.remaining, d.retry_after, d.delay)
    assert r.admitted == sum(r.allowed)
    if ts:
        assert a.clock.now() == b.clock.now()
    # the two limiters end in the same state
    assert a.peek(0) == b.peek(0)


@pytest.mark.parametrize("kind", sorted(MAKERS))
@given(
    ts=st.lists(
        st.one_of(
            st.floats(0, 1e13),  # up to ~300 000 years: past 2^52 ns (52 days)
            st.integers(0, 10**16).map(lambda n: n / 2e9),  # halves of a nanosecond
            st.integers(4_503_599_627_370_000, 4_503_599_627_371_000).map(lambda n: n / 1e9),
        ),
        max_size=60,
    ),
)
def test_replay_time_rounding_equals_single_calls(kind, ts):
    """replay converts times to nanoseconds exactly as clock.set does, on both sides of
    2^52 ns and at ties (halves away from zero)."""
    a = MAKERS[kind](weir.ManualClock())
    r = weir.replay(a, ts)
    b = MAKERS[kind](weir.ManualClock())
    for i, t in enumerate(ts):
        b.clock.set(t)
        d = b.try_acquire()
        assert r[i] == (d.allowed, d.remaining, d.retry_after, d.delay)
    if ts:
        assert a.clock.now() == b.clock.now()
    assert a.peek(0) == b.peek(0)


def test_replay_leaky_bucket_delays_column():
    c = weir.ManualClock()
    lb = weir.LeakyBucket(2, 1.0, 2, delay=1, clock=c)
    r = weir.replay(lb, [0.0] * 4)
    assert list(r.allowed) == [True, True, True, False]
    assert list(r.delay) == [0.0, 0.0, 0.5, 0.0]
    assert list(r.retry_after) == [0.0, 0.0, 0.0, 0.5]


def test_replay_sliding_log_capacity_and_big_trace():
    sl = weir.SlidingLog(100, 1.0, clock=weir.ManualClock())
    with pytest.raises(weir.InsufficientCapacity) as e:
        weir.replay(sl, [0.0, 0.0], [1, 101])
    assert e.value.index == 1 and e.value.capacity == 100
    # big enough to run without the GIL; exactly 100 per second
    r = weir.replay(sl, [i * 1e-4 for i in range(100_000)])
    assert r.admitted == 1000


def test_replay_columns_layout():
    np = pytest.importorskip("numpy")
    tb = weir.FixedWindow(2, 1.0, clock=weir.ManualClock())
    r = weir.replay(tb, np.array([0.0, 0.1, 0.2, 1.0]))
    cols = r.to_numpy()
    assert cols["allowed"].tolist() == [True, True, False, True]
    assert cols["remaining"].tolist() == [1, 0, 0, 1]
    assert cols["retry_after"].tolist() == [0.0, 0.0, 0.8, 0.0]
    assert cols["delay"].tolist() == [0.0] * 4
    assert all(not c.flags.writeable for c in cols.values())


@pytest.mark.parametrize("kind", ["TokenBucket", "LeakyBucket", "FixedWindow", "SlidingWindow", "SlidingLog"])
def test_replay_across_chunks(kind):
    """Traces longer than one native chunk (32768 events, read from a buffer a chunk at a
    time): strided, numpy and array inputs; errors past the first chunk report the global
    index and change nothing; decisions equal the single calls across the boundaries."""
    np = pytest.importorskip("numpy")
    n = 70_001
    rng = np.random.default_rng(7)
    ts = np.cumsum(rng.exponential(0.3, 2 * n))[::2]  # strided: not C-contiguous
    costs = rng.integers(0, 4, n).astype(np.uint64)
    c = weir.ManualClock()
    a = MAKERS[kind](c)
    bad = ts.copy()
    bad[65_540] = -1.0
    with pytest.raises(ValueError, match=r"times\[65540\]"):
        weir.replay(a, bad, costs)
    over = costs.copy()
    over[40_000] = 99
    with pytest.raises(weir.InsufficientCapacity) as e:
        weir.replay(a, ts, over)
    assert e.value.index == 40_000
    with pytest.raises(ValueError, match="costs has 70000 items"):
        weir.replay(a, ts, costs[:-1])
    assert c.now() == 0.0 and a.peek(0) == MAKERS[kind](weir.ManualClock()).peek(0)
    r = weir.replay(a, ts, costs)
    r2 = weir.replay(MAKERS[kind](weir.ManualClock()), array.array("d", ts.tolist()), costs.tolist())
    b = MAKERS[kind](weir.ManualClock())
    for i in range(n):
        b.clock.set(ts[i])
        d = b.try_acquire(int(costs[i]))
        assert r[i] == r2[i] == (d.allowed, d.remaining, d.retry_after, d.delay)
    assert r.admitted == sum(r.allowed) and a.clock.now() == b.clock.now()
    assert a.peek(0) == b.peek(0)


@pytest.mark.parametrize("kind", list(MAKERS))
def test_replay_into_huge_pages_and_out_buffers(kind):
    """A result large enough for the huge-page map (4 MiB: 250k events), written in place,
    and a small one written into an explicit `out` buffer (the chunk-copy path) equal the
    `out` path and the plain `bytes` path; the columns stay read-only; the wait split works
    on the map."""
    np = pytest.importorskip("numpy")

    from weir import _weir

    n = 300_000
    rng = np.random.default_rng(11)
    ts = np.cumsum(rng.exponential(1e-4, n))
    costs = rng.integers(0, 3, n).astype(np.uint64)

    def run(make_out, m):
        lim = MAKERS[kind](weir.ManualClock())
        cols, ad, de = _weir._replay(lim, memoryview(ts[:m]), memoryview(costs[:m]), make_out(m))
        return cols, ad, de, lim.clock.now_ns()

    want = run(lambda m: bytearray(17 * m), n)
    big = run(lambda m: None, n)
    assert isinstance(big[0], _weir._Columns) and len(big[0]) == 17 * n
    assert big[0].capacity % (2 << 20) == 0 and big[0].capacity >= 17 * n
    assert big[0].tobytes() == bytes(want[0]) and big[1:] == want[1:]
    small = run(lambda m: None, 1000)
    assert isinstance(small[0], bytes)
    assert bytes(run(lambda m: bytearray(17 * m), 1000)[0]) == small[0]
    with pytest.raises(ValueError, match="out must have"):
        run(lambda m: bytearray(17 * m - 1), 10)
    r = weir.replay(MAKERS[kind](weir.ManualClock()), ts, costs)
    assert r.remaining.readonly and r.allowed.readonly
    assert r.admitted == want[1] and r.delayed == want[2]
    # ... and equal single calls, event by event.
    a = MAKERS[kind](weir.ManualClock())
    rem = np.asarray(r.remaining)
    allowed = np.asarray(r.allowed)
    for i, (t, k) in enumerate(zip(ts.tolist(), costs.tolist())):
        a.clock.set(t)
        d = a.try_acquire(k)
        if d.allowed != allowed[i] or d.remaining != rem[i]:
            pytest.fail(f"event {i}: {d} vs {r[i]}")
    ra, dl = (np.asarray(c) for c in (r.retry_after, r.delay))
    assert (ra[allowed] == 0).all() and (dl[~allowed] == 0).all()
    assert ((ra + dl) == np.asarray(r._wait)).all()


def test_items_are_decisions_and_slices_are_results():
    """`result[i]` is a decision whose truth value is `.allowed` (a rejected event is
    falsy); slicing gives a result of the slice; iteration yields the same decisions."""
    lb = weir.LeakyBucket(2, 1.0, 2, delay=1, clock=weir.ManualClock())
    r = weir.replay(lb, [0.0, 0.0, 0.0, 0.0, 0.6, 5.0])
    assert [bool(d) for d in r] == [True, True, True, False, True, True]
    d = r[3]
    assert isinstance(d, weir.ReplayDecision) and not d
    assert (d.allowed, d.remaining, d.delay) == (False, 0, 0.0) and d.retry_after == 0.5
    assert r[2].allowed and r[2].delay == 0.5 and r[2].retry_after == 0.0 and r[-1] == r[5]
    assert list(r) == [r[i] for i in range(len(r))]
    s = r[2:5]
    assert isinstance(s, weir.ReplayResult) and len(s) == 3
    assert list(s) == [r[2], r[3], r[4]]
    assert (s.admitted, s.rejected, s.delayed) == (2, 1, sum(1 for x in s if x.delay))
    assert list(s.delay) == [x.delay for x in s] and list(s.retry_after) == [x.retry_after for x in s]
    # steps and empty slices; a slice of a slice
    assert list(r[::2]) == [r[0], r[2], r[4]] and len(r[4:2]) == 0 and r[1:][1:][0] == r[2]
    assert r[::-1][0] == r[5] and r[::2].admitted == 3
    with pytest.raises(IndexError):
        r[6]


def test_slice_numpy_and_no_delay_kind():
    np = pytest.importorskip("numpy")
    tb = weir.TokenBucket(1, 1.0, 2, clock=weir.ManualClock())
    r = weir.replay(tb, np.arange(0, 10, 0.25))
    s = r[10:30:3]
    cols = s.to_numpy()
    assert cols["allowed"].tolist() == [bool(x) for x in s]
    assert s.admitted == int(cols["allowed"].sum()) and s.delayed == 0
    assert cols["delay"].tolist() == [0.0] * len(s)
    assert cols["retry_after"].tolist() == [x.retry_after for x in r][10:30:3]


def test_version_is_the_package_version():
    from importlib.metadata import version

    assert weir.__version__ == version("weir")
    assert weir.__version__.count(".") == 2


def test_mapped_columns_outlive_the_result_and_views():
    """A large result's columns live in a memory map the native side owns, viewed through
    ctypes: every column view and numpy array keeps the map alive after the result and the
    other views are gone, the views are read-only and zero-copy, and the map is unmapped
    once the last view goes (no leak over many results)."""
    np = pytest.importorskip("numpy")
    import gc

    from weir import _weir, _replay

    def mapped(address):
        """Whether a mapping starts at `address` (None: /proc is not there to tell)."""
        if not os.path.exists("/proc/self/maps"):
            return None
        with open("/proc/self/maps") as f:
            return any(int(line.split("-", 1)[0], 16) == address for line in f)

    n = 300_000
    ts = np.cumsum(np.random.default_rng(5).exponential(1e-4, n))
    for kind in ("FixedWindow", "LeakyBucket"):
        r = weir.replay(MAKERS[kind](weir.ManualClock()), ts)
        assert isinstance(r._columns, _weir._Columns)
        base = r._columns.address
        assert mapped(base) in (True, None)
        want = [tuple(r[i]) for i in (0, 1, n // 2, n - 1)]
        want_allowed = np.asarray(r.allowed).copy()
        allowed = np.asarray(r.allowed)
        tail = r[n - 10 :]
        remaining = r.to_numpy()["remaining"]
        # zero-copy: the numpy arrays point into the map
        assert allowed.__array_interface__["data"][0] == base + 16 * n
        assert remaining.__array_interface__["data"][0] == base
        assert not allowed.flags.writeable and not remaining.flags.writeable
        with pytest.raises(TypeError):
            r.allowed[0] = False
        del r
        gc.collect()
        assert mapped(base) in (True, None)  # the views still hold it
        assert (allowed == want_allowed).all()
        assert tuple(tail[9]) == want[3] and len(tail) == 10
        del allowed, tail
        gc.collect()
        assert mapped(base) in (True, None)
        assert remaining[0] == want[0][1] and remaining[n // 2] == want[2][1]
        del remaining
        gc.collect()
        assert mapped(base) in (False, None)  # unmapped with the last view
    # many results, each dropped: the mappings are freed
    addresses = set()
    for _ in range(20):
        r = weir.replay(MAKERS["TokenBucket"](weir.ManualClock()), ts)
        assert np.asarray(r.allowed).sum() == r.admitted
        addresses.add(r._columns.address)
        del r
    gc.collect()
    assert not any(mapped(a) for a in addresses)
    assert len(_replay._VIEW_TYPES) <= 2


def test_mapped_columns_without_ctypes(monkeypatch):
    """Where ctypes is missing, a large result is copied once into a bytes: same columns."""
    np = pytest.importorskip("numpy")
    from weir import _replay

    ts = np.cumsum(np.random.default_rng(6).exponential(1e-4, 300_000))
    a = weir.replay(weir.SlidingWindow(5000, 1.0, clock=weir.ManualClock()), ts)
    monkeypatch.setattr(_replay, "ctypes", None)
    b = weir.replay(weir.SlidingWindow(5000, 1.0, clock=weir.ManualClock()), ts)
    assert isinstance(b.allowed.obj, bytes)
    for c in ("allowed", "remaining", "retry_after", "delay"):
        assert getattr(a, c) == getattr(b, c)
