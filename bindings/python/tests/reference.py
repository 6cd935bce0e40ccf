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
    """The binding's documented conversion: nearest nanosecond of seconds × 1e9."""
    return int(round(seconds * 1e9))


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
