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
