"""Small pure-Python reference models: the ideal semantics the core must match exactly.

Time is integer nanoseconds; rational quantities use ``fractions.Fraction`` so no model
rounds anywhere except where the contract says it does (``retry_after`` / ``reset_after``
round up to whole nanoseconds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction


def ns(seconds: float) -> int:
    """The binding's documented conversion: nearest nanosecond of seconds × 1e9 (a double),
    halves away from zero (Python's round() would go to even)."""
    x = seconds * 1e9
    if x >= 2.0**64:
        return 2**64 - 1
    i = int(x)
    return i + (1 if x - i >= 0.5 else 0)


def ceil_frac(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


@dataclass
class D:
    """A decision in integer nanoseconds."""

    allowed: bool
    remaining: int
    retry_after: int
    delay: int = 0
    reset_after: int = 0


class GcraModel:
    """Rational GCRA: admit cost n at now iff max(TAT, now) + n·T ≤ now + burst·T."""

    def __init__(self, rate: int, per_ns: int, burst: int, start_ns: int = 0):
        self.T = Fraction(per_ns, rate)
        self.burst = burst
        self.W = burst * self.T
        self.tat = Fraction(start_ns)

    def _levels(self, ahead: Fraction):
        if ahead <= 0:
            return self.burst, 0
        if ahead <= self.W:
            r = math.floor((self.W - ahead) / self.T)
            return r, ceil_frac(ahead - (self.W - (r + 1) * self.T))
        return 0, ceil_frac(ahead - self.W + self.T)

    def acquire(self, now: int, cost: int = 1) -> D:
        if cost > self.burst:
            raise OverflowError("insufficient capacity")
        ahead = max(self.tat - now, Fraction(0))
        inc = cost * self.T
        if ahead + inc <= self.W:
            if cost:
                self.tat = now + ahead + inc
            r, reset = self._levels(ahead + inc)
            return D(True, r, 0, 0, reset)
        r, reset = self._levels(ahead)
        return D(False, r, ceil_frac(ahead + inc - self.W), 0, reset)


class BreakerModel:
    """Consecutive-failures breaker without jitter or ramp, as documented in weir-core:
    trip after n failures in a row; OPEN lasts min(max, base·mult^k); the first call after
    it is a probe (HALF_OPEN, at most `probes` in flight, `successes` to close); a probe
    failure or a HALF_OPEN older than probe_timeout re-opens with k+1; k resets when the
    breaker trips after being closed for at least `max`. Tickets carry an epoch; stale
    ones and non-probe outcomes outside CLOSED are ignored. The binding hands tickets back
    oldest first."""

    def __init__(self, n, base, mx, mult_milli, probes, successes, probe_timeout):
        self.n, self.base, self.max, self.mult = n, base, mx, mult_milli
        self.probes_cap, self.successes, self.probe_timeout = probes, successes, probe_timeout
        self.state, self.at, self.epoch, self.k = "closed", 0, 0, 0
        self.consec = self.probes = self.succ = 0
        self.tickets = []
        self.transitions = []

    def _cooldown(self, k):
        d = self.base
        for _ in range(k):
            if d >= self.max:
                break
            d = d * self.mult // 1000
        return min(d, self.max)

    def _move(self, now, to):
        self.transitions.append((now, self.state, to))
        self.state = to
        self.epoch += 1
        self.consec = self.probes = self.succ = 0

    def _open(self, now, k):
        self._move(now, "open")
        self.k = min(k, 63)
        self.at = now + self._cooldown(self.k)

    def effective(self, now):
        if self.state == "open" and now >= self.at:
            return "half_open"
        if self.state == "half_open" and now >= self.at:
            return "open"
        return self.state

    def allow(self, now):
        if self.state == "closed":
            self.tickets.append((self.epoch, False))
            return True
        if self.state == "open":
            if now < self.at:
                return False
            self._move(now, "half_open")
            self.probes = 1
            self.at = now + self.probe_timeout
            self.tickets.append((self.epoch, True))
            return True
        if now >= self.at:
            self._open(now, self.k + 1)
            return False
        if self.probes < self.probes_cap:
            self.probes += 1
            self.tickets.append((self.epoch, True))
            return True
        return False

    def record(self, now, failed):
        if not self.tickets:
            if not self.allow(now):
                return
        epoch, probe = self.tickets.pop(0)
        if epoch != self.epoch:
            return
        if self.state == "half_open" and probe:
            if failed:
                self._open(now, self.k + 1)
            else:
                self.probes -= 1
                self.succ += 1
                if self.succ >= self.successes:
                    self._move(now, "closed")
                    self.at = now
        elif self.state == "closed" and not probe:
            if failed:
                self.consec += 1
                if self.consec >= self.n:
                    k = 0 if now >= self.at + self.max else self.k
                    self._open(now, k)
            else:
                self.consec = 0


class NginxModel:
    """nginx ``limit_req`` step by step, in exact units of ``1/rate`` ns (one request =
    ``per_ns`` units, so the leak over ``dt`` ns is ``dt·rate`` units) instead of nginx's
    milli-requests and whole milliseconds.

    nginx keeps ``excess`` and ``last``; a request at ``now`` finds
    ``e = max(0, excess − (now − last)·rate + 1 request)`` and is rejected when
    ``e > burst``, else ``excess, last = e, now`` and it passes at once when ``nodelay`` or
    ``e ≤ delay``, otherwise after ``(e − delay) / rate``. Cost ``n`` is ``n`` requests at the
    same instant (``e + (n−1)`` requests). Elapsed time is *signed*: a clock rewind leaks
    negatively (more excess), as the core documents. A bucket created at ``start`` is idle:
    its next request finds ``e = 0`` exactly at ``start`` (``excess = −1`` request).
    """

    def __init__(self, rate, per_ns, burst, delay=0, nodelay=False, start_ns=0):
        self.rate, self.T = rate, per_ns
        self.burst = burst
        self.free = burst if nodelay else min(delay, burst)
        self.excess, self.last = -per_ns, start_ns

    def _e1(self, now):
        """Excess a first request at ``now`` would find (the clamped nginx value)."""
        return max(0, self.excess + self.T - (now - self.last) * self.rate)

    def _levels(self, ahead):
        """(remaining, reset_after) when the next request would find ``ahead`` − 1 request
        of excess: requests passing without delay, and ns until that count grows."""
        undelayed = (self.free + 1) * self.T
        k = (undelayed - ahead) // self.T if ahead <= undelayed else 0
        if ahead == 0:
            return k, 0
        return k, ceil_frac(Fraction(ahead - undelayed + (k + 1) * self.T, self.rate))

    def acquire(self, now, cost=1):
        if cost > self.burst + 1:
            raise OverflowError("insufficient capacity")
        e1 = self._e1(now)
        W = (self.burst + 1) * self.T
        if e1 + cost * self.T > W:
            x = self.excess + self.T - (now - self.last) * self.rate
            retry = ceil_frac(Fraction(x - (W - cost * self.T), self.rate))
            r, reset = self._levels(e1)
            return D(False, r, retry, 0, reset)
        if cost == 0:
            r, reset = self._levels(e1)
            return D(True, r, 0, 0, reset)
        e = e1 + (cost - 1) * self.T  # nginx's excess after these requests
        self.excess, self.last = e, now
        delay = 0 if e <= self.free * self.T else ceil_frac(Fraction(e - self.free * self.T, self.rate))
        r, reset = self._levels(e + self.T)
        return D(True, r, 0, delay, reset)


def sat(x):
    return min(x, 2**64 - 1)


class FixedWindowModel:
    """Counts per aligned window ``[i·W, (i+1)·W)``; a rewind stays in the latest window seen."""

    def __init__(self, limit, window_ns):
        self.limit, self.W = limit, window_ns
        self.cur = None  # (latest window index with admissions, its count)

    def acquire(self, now, cost=1):
        if cost > self.limit:
            raise OverflowError("insufficient capacity")
        idx = now // self.W
        i, c = self.cur if self.cur is not None and self.cur[0] >= idx and self.cur[1] > 0 else (idx, 0)
        end = sat((i + 1) * self.W - now)
        # Every acquisition records the window it evaluated (as weir-core does).
        if c + cost <= self.limit:
            self.cur = (i, c + cost)
            return D(True, self.limit - c - cost, 0, 0, end if c + cost else 0)
        self.cur = (i, c)
        return D(False, self.limit - c, end, 0, end)


class SlidingCounterModel:
    """The sliding-window counter: estimate ``⌈prev·(W − e)/W⌉ + cur`` at elapsed ``e`` in
    the current window; admit while ``estimate + cost ≤ limit``. A rewind is evaluated at
    the start of the latest window seen. ``retry_after`` / ``reset_after`` are found by
    search over the (monotone) estimate: the first instant this cost fits / the remaining
    count grows."""

    def __init__(self, limit, window_ns):
        self.limit, self.W = limit, window_ns
        self.state = None  # (latest window index, prev, cur)

    def _at(self, now):
        idx, e = divmod(now, self.W)
        s = self.state
        if s is None or (s[1] == 0 and s[2] == 0):
            return idx, 0, 0, e
        i, p, c = s
        if i == idx:
            return i, p, c, e
        if idx == i + 1:
            return idx, c, 0, e
        if i > idx:
            return i, p, c, 0
        return idx, 0, 0, e

    def estimate(self, now, extra_cur=0):
        _, p, c, e = self._at(now)
        return -((-p * (self.W - e)) // self.W) + c + extra_cur

    def _first(self, now, pred):
        """Smallest d ≥ 0 with pred(now + d) (monotone), searched up to three windows past
        the latest window seen."""
        i = self._at(now)[0]
        hi = (i + 3) * self.W - now
        lo = 0
        while lo < hi:
            mid = (lo + hi) // 2
            if pred(now + mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _reset_after(self, now, extra_cur):
        est = self.estimate(now, extra_cur)
        if est == 0:
            return 0
        r0 = self.limit - min(est, self.limit)
        return self._first(now, lambda t: self.estimate(t, extra_cur) + r0 + 1 <= self.limit)

    def acquire(self, now, cost=1):
        if cost > self.limit:
            raise OverflowError("insufficient capacity")
        est = self.estimate(now)
        if est + cost <= self.limit:
            # reset_after with this cost counted in the current window.
            # Every acquisition records the window it evaluated (as weir-core does).
            i, p, c, _ = self._at(now)
            self.state = (i, p, c + cost)
            reset = self._reset_after(now, 0)
            return D(True, self.limit - est - cost, 0, 0, reset)
        retry = self._first(now, lambda t: self.estimate(t) + cost <= self.limit)
        reset = self._reset_after(now, 0)
        i, p, c, _ = self._at(now)
        self.state = (i, p, c)
        return D(False, max(0, self.limit - est), retry, 0, reset)


class SlidingLogModel:
    """The exact sliding log as a plain event list (never pruned): an admitted unit at
    ``t`` counts while ``max(now, latest) < t + W``; a rewind counts as no time passed.
    Times in decisions are measured from the given ``now``."""

    def __init__(self, limit, window_ns):
        self.limit, self.W = limit, window_ns
        self.events = []
        self.latest = 0

    def acquire(self, now, cost=1):
        if cost > self.limit:
            raise OverflowError("insufficient capacity")
        self.latest = eff = max(now, self.latest)
        live = sorted(t for t in self.events if t + self.W > eff)
        n = len(live)
        if n + cost <= self.limit:
            self.events += [eff] * cost
            if n:
                reset = live[0] + self.W - now
            elif cost:
                reset = eff + self.W - now
            else:
                reset = 0
            return D(True, self.limit - n - cost, 0, 0, sat(reset))
        # the (n + cost − limit)-th oldest live unit must leave
        retry = live[n + cost - self.limit - 1] + self.W - now
        return D(False, self.limit - n, sat(retry), 0, sat(live[0] + self.W - now))
