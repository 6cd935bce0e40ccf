import math
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import weir
from reference import BreakerModel, ns

# ---- Semaphore ---------------------------------------------------------------------------


def test_semaphore_permits_are_context_managers():
    s = weir.Semaphore(2)
    assert (s.max, s.in_use, s.available) == (2, 0, 2)
    with s.try_acquire() as p:
        assert isinstance(p, weir.Permit) and p.count == 1
        assert s.available == 1
        assert s.try_acquire(2) is None
        q = s.try_acquire()
        assert q is not None and s.try_acquire() is None
        q.release()
        q.release()  # idempotent
        assert q.released and q.count == 0
    assert s.in_use == 0 and p.released
    assert s.try_acquire(3) is None  # more than max: never
    assert s.try_acquire(0).count == 0
    assert repr(s) == "Semaphore(max=2, in_use=0)"


def test_semaphore_permit_released_on_exception_and_gc():
    s = weir.Semaphore(1)
    with pytest.raises(RuntimeError):
        with s.try_acquire():
            raise RuntimeError
    assert s.available == 1
    p = s.try_acquire()
    del p
    assert s.available == 1


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-1, ValueError), (1.5, TypeError), ("2", TypeError)])
def test_semaphore_bad_max(bad, exc):
    with pytest.raises(exc, match="max"):
        weir.Semaphore(bad)


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 4)), max_size=80), st.integers(1, 6))
def test_semaphore_matches_counter(ops, mx):
    s = weir.Semaphore(mx)
    held, used = [], 0
    for acquire, n in ops:
        if acquire:
            p = s.try_acquire(n)
            assert (p is not None) == (used + n <= mx)
            if p is not None:
                held.append(p)
                used += n
        elif held:
            p = held.pop(n % len(held))
            used -= p.count
            p.release()
        assert s.in_use == used


def test_semaphore_threads():
    s = weir.Semaphore(3)
    peak = []

    def work():
        for _ in range(2000):
            p = s.try_acquire()
            if p:
                peak.append(s.in_use)
                p.release()

    ts = [threading.Thread(target=work) for _ in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert max(peak) <= 3 and s.in_use == 0


# ---- Deadline ----------------------------------------------------------------------------


@given(st.integers(0, 10**12), st.lists(st.integers(-(10**12), 10**12), max_size=30))
def test_deadline_matches_model(total_ns, moves):
    c = weir.ManualClock(start=1000.0)
    start = c.now_ns()
    d = weir.Deadline(total_ns / 1e9, clock=c)
    total = ns(total_ns / 1e9)
    now = start
    for m in moves:
        now = max(0, now + m)
        c.set(now / 1e9)
        now = c.now_ns()
        left = max(0, total - max(0, now - start))
        assert d.remaining() == left / 1e9
        assert d.expired() == (left == 0)
        assert d.per_try(0.2) == min(ns(0.2), left) / 1e9
        assert d.can_start_attempt(0.1, 0.01) == (max(0, left - ns(0.1)) >= max(1, ns(0.01)))


def test_deadline_basics():
    c = weir.ManualClock()
    d = weir.Deadline(0.5, clock=c)
    assert d.total == 0.5 and d.clock is c
    c.advance(0.35)
    assert d.remaining() == pytest.approx(0.15) and d.per_try(0.2) == pytest.approx(0.15)
    assert d.elapsed() == pytest.approx(0.35)
    c.advance(1)
    assert d.expired() and d.remaining() == 0.0
    assert "Deadline(total=0.5" in repr(d)
    with pytest.raises(ValueError, match="total"):
        weir.Deadline(-1)
    with pytest.raises(ValueError, match="cap"):
        d.per_try(float("nan"))
    assert weir.Deadline(math.inf).remaining() > 1e9


# ---- RetryBudget -------------------------------------------------------------------------


def test_retry_budget_reserve_only():
    c = weir.ManualClock()
    b = weir.RetryBudget(0.0, 1, 10.0, clock=c)
    assert sum(b.try_withdraw() for _ in range(20)) == 10


def test_retry_budget_ratio():
    c = weir.ManualClock()
    b = weir.RetryBudget(0.2, 0, 10.0, clock=c)
    assert not b.try_withdraw()
    for _ in range(100):
        b.deposit()
    assert b.available() == 20
    assert sum(b.try_withdraw() for _ in range(50)) == 20
    c.advance(30)  # deposits expire after ttl
    for _ in range(10):
        b.deposit()
    assert b.available() == 2


@given(st.floats(0, 2), st.integers(0, 20), st.lists(st.tuples(st.booleans(), st.integers(0, 3_000_000_000)), max_size=60))
def test_retry_budget_never_exceeds_ratio_plus_reserve(ratio, mps, ops):
    c = weir.ManualClock()
    b = weir.RetryBudget(ratio, mps, 10.0, clock=c)
    deposits = withdrawals = 0
    for dep, dt in ops:
        c.advance(dt / 1e9 / 10)
        if dep:
            b.deposit()
            deposits += 1
        elif b.try_withdraw():
            withdrawals += 1
    total_time = c.now() + 10
    assert withdrawals <= ratio * deposits + mps * total_time + 1


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(ratio=-0.1, min_per_sec=1, ttl=10.0), "ratio"),
        (dict(ratio=float("nan"), min_per_sec=1, ttl=10.0), "ratio"),
        (dict(ratio=0.2, min_per_sec=-1, ttl=10.0), "min_per_sec"),
        (dict(ratio=0.2, min_per_sec=1, ttl=0.5), "ttl"),
        (dict(ratio=0.2, min_per_sec=1, ttl=-1.0), "ttl"),
    ],
)
def test_retry_budget_bad_args(kw, name):
    with pytest.raises(ValueError, match=name):
        weir.RetryBudget(**kw)


# ---- Backoff -----------------------------------------------------------------------------


def test_backoff_schedule_without_jitter():
    b = weir.Backoff(0.025, 0.25, jitter="none")
    assert [b.delay(i) for i in range(7)] == [0.0, 0.025, 0.05, 0.1, 0.2, 0.25, 0.25]
    assert b.delay(2**40) == 0.25
    assert (b.base, b.max, b.jitter, b.multiplier) == (0.025, 0.25, "none", 2.0)


@given(st.integers(1, 10**6), st.integers(1, 10**9), st.integers(0, 70), st.integers(0, 2**64 - 1))
def test_backoff_bounds(base_us, extra_ns, attempt, seed):
    base = base_us / 1e6
    mx = base + extra_ns / 1e9
    d_sched = min(ns(mx), ns(base) * 2 ** max(attempt - 1, 0)) if attempt else 0
    for jitter in ("none", "full", "equal", "decorrelated"):
        b = weir.Backoff(base, mx, jitter=jitter, seed=seed)
        d = ns(b.delay(attempt))
        assert 0 <= d <= ns(mx)
        if jitter == "none":
            assert d == d_sched
        elif jitter == "full":
            assert d <= d_sched
        elif jitter == "equal":
            assert d_sched // 2 <= d <= d_sched


def test_backoff_seed_fixes_jitter():
    a = weir.Backoff(0.1, 10.0, seed=42)
    b = weir.Backoff(0.1, 10.0, seed=42)
    assert [a.delay(i) for i in range(1, 20)] == [b.delay(i) for i in range(1, 20)]
    assert a.seed == 42 and "seed=42" in repr(a)


@pytest.mark.parametrize(
    "kw, exc, name",
    [
        (dict(base=0.0, max=1.0), ValueError, "base"),
        (dict(base=2.0, max=1.0), ValueError, "base"),
        (dict(base=0.1, max=1.0, jitter="sometimes"), ValueError, "jitter"),
        (dict(base=0.1, max=1.0, jitter=1), TypeError, "jitter"),
        (dict(base=0.1, max=1.0, multiplier=0.5), ValueError, "multiplier"),
        (dict(base=0.1, max=1.0, seed=-1), ValueError, "seed"),
    ],
)
def test_backoff_bad_args(kw, exc, name):
    with pytest.raises(exc, match=name):
        weir.Backoff(**kw)


def test_backoff_bad_attempt():
    with pytest.raises(ValueError, match="attempt"):
        weir.Backoff(0.1, 1.0).delay(-1)


# ---- CircuitBreaker ----------------------------------------------------------------------


def test_breaker_three_phases():
    c = weir.ManualClock()
    b = weir.CircuitBreaker(consecutive_failures=3, cooldown_base=1.0, cooldown_max=8.0, jitter=0.0, clock=c, seed=1)
    assert b.state == "closed"
    for _ in range(3):
        assert b.allow()
        b.record_failure()
    assert b.state == "open" and not b.allow()
    c.advance(1.0)
    assert b.state == "half_open"
    assert b.allow()
    assert not b.allow()  # one probe at a time
    b.record_failure()  # failed recovery: cooldown doubles
    assert b.state == "open" and b.failed_recoveries == 1
    c.advance(1.5)
    assert b.state == "open"
    c.advance(0.5)
    assert b.allow()
    b.record_success()
    assert b.state == "closed"
    assert b.transitions() == [
        (0.0, "closed", "open"),
        (1.0, "open", "half_open"),
        (1.0, "half_open", "open"),
        (3.0, "open", "half_open"),
        (3.0, "half_open", "closed"),
    ]
    assert "CircuitBreaker(state='closed'" in repr(b)


def test_breaker_failure_rate_and_ramp():
    c = weir.ManualClock()
    b = weir.CircuitBreaker(failure_rate=0.5, window=4, min_calls=4, cooldown_base=1.0, jitter=0.0, ramp=10.0, clock=c, seed=7)
    for ok in (True, False, True, False):
        assert b.allow()
        (b.record_success if ok else b.record_failure)()
    assert b.state == "open"
    c.advance(1)
    assert b.allow()
    b.record_success()
    assert b.state == "closed"
    admitted = []
    for i in range(100):
        c.advance(0.1)
        a = b.allow()
        admitted.append(a)
        if a:
            b.record_success()
    first, last = sum(admitted[:30]), sum(admitted[70:])
    assert first < last  # the ramp admits a rising fraction
    c.advance(0.5)  # past the ramp: everything
    assert all(b.allow() for _ in range(50))


def test_breaker_cancel_and_outstanding():
    b = weir.CircuitBreaker(consecutive_failures=1, clock=weir.ManualClock())
    assert b.allow() and b.allow() and b.outstanding == 2
    assert b.cancel() and b.outstanding == 1
    b.record_success()
    assert not b.cancel()
    b.record_failure()  # no outstanding ticket: asks allow() first
    assert b.state == "open"


def test_breaker_jitter_is_seeded():
    def run(seed):
        c = weir.ManualClock()
        b = weir.CircuitBreaker(consecutive_failures=1, cooldown_base=1.0, jitter=0.5, clock=c, seed=seed)
        out = []
        for _ in range(20):
            if b.allow():
                b.record_failure()
            out.append(b.state)
            c.advance(0.05)
        return b.transitions()

    assert run(3) == run(3)
    assert run(3) != run(4)


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(consecutive_failures=0), "consecutive_failures"),
        (dict(failure_rate=0.0), "failure_rate"),
        (dict(failure_rate=1.5), "failure_rate"),
        (dict(failure_rate=0.5, window=0), "window"),
        (dict(failure_rate=0.5, window=30), "window"),
        (dict(failure_rate=0.5, window=5, min_calls=6), "min_calls"),
        (dict(cooldown_base=0.0), "cooldown_base"),
        (dict(cooldown_base=10.0, cooldown_max=5.0), "cooldown"),
        (dict(multiplier=0.5), "multiplier"),
        (dict(jitter=1.5), "jitter"),
        (dict(probes=0), "probes"),
        (dict(successes=0), "successes"),
        (dict(ramp=-1.0), "ramp"),
        (dict(seed=-3), "seed"),
    ],
)
def test_breaker_bad_args(kw, name):
    with pytest.raises(ValueError, match=name):
        weir.CircuitBreaker(**kw)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("allow"), st.just(0)),
        st.tuples(st.just("ok"), st.just(0)),
        st.tuples(st.just("fail"), st.just(0)),
        st.tuples(st.just("wait"), st.integers(0, 3_000)),  # ms
        st.tuples(st.just("rewind"), st.integers(0, 3_000)),
    ),
    max_size=80,
)


@given(
    n=st.integers(1, 4),
    base_ms=st.integers(1, 1000),
    factor=st.integers(1, 8),
    mult=st.sampled_from([1.0, 1.5, 2.0, 3.0]),
    probes=st.integers(1, 3),
    successes=st.integers(1, 3),
    script=ops,
)
def test_breaker_matches_model(n, base_ms, factor, mult, probes, successes, script):
    c = weir.ManualClock(start=5.0)
    b = weir.CircuitBreaker(
        consecutive_failures=n,
        cooldown_base=base_ms / 1000,
        cooldown_max=base_ms * factor / 1000,
        multiplier=mult,
        jitter=0.0,
        probes=probes,
        successes=successes,
        probe_timeout=2.0,
        clock=c,
        seed=0,
    )
    m = BreakerModel(n, base_ms * 10**6, base_ms * factor * 10**6, int(mult * 1000), probes, successes, 2 * 10**9)
    for op, arg in script:
        now = c.now_ns()
        if op == "allow":
            assert b.allow() == m.allow(now)
        elif op == "ok":
            b.record_success()
            m.record(now, False)
        elif op == "fail":
            b.record_failure()
            m.record(now, True)
        elif op == "wait":
            c.advance(arg / 1000)
        else:
            c.set(max(0.0, c.now() - arg / 1000))
        assert b.state == m.effective(c.now_ns())
        assert b.outstanding == len(m.tickets)
    assert b.transitions() == [(t / 1e9, f, to) for t, f, to in m.transitions]
