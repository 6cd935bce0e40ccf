"""Seed 001's three phases — healthy, backend dead, backend back — through weir's breaker.

A gateway fleet of 4 instances, each with its own breaker, sends ~175 req/s to one backend:
healthy for 12 s, dead for 28 s (connection refused), then restarted. A restarted backend
is cold: its capacity climbs from 20 to 300 req/s over 8 s, and calls beyond it fail.

Three breaker configurations, same traffic (seeded), all on one ManualClock:

1. *fixed*: 5 consecutive failures, a fixed 15 s cooldown, 2 probe successes to close —
   the seed's configuration. Every instance probes at the same instants, and closing
   sends full traffic to the cold backend: it trips again (thrashing).
2. *jitter*: exponential cooldown 5 s ×2 up to 60 s, ±20 % jitter, so instances spread
   their probes and back off while the backend is dead.
3. *jitter + ramp*: as 2, plus a 10 s ramp after closing: the admitted fraction rises
   linearly, the cold backend keeps up, and the breaker stays closed.

Usage: python examples/python/breaker.py [--out DIR]   (writes breaker.png; headless)
"""

from __future__ import annotations

import random
import sys
from collections import Counter

import weir

import _figure  # examples/python/_figure.py

HEALTHY_UNTIL, DEAD_UNTIL, END = 12.0, 40.0, 70.0
RATE = 175.0  # requests per second, whole fleet
INSTANCES = 4
WARMUP = 8.0  # seconds for a restarted backend to reach full capacity


def backend_capacity(t: float) -> float:
    """Requests per second the backend can serve at t (0 while dead)."""
    if t < HEALTHY_UNTIL:
        return 1e9
    if t < DEAD_UNTIL:
        return 0.0
    return 20.0 + (300.0 - 20.0) * min(1.0, (t - DEAD_UNTIL) / WARMUP)


CONFIGS = {
    "fixed 15 s cooldown": dict(consecutive_failures=5, cooldown_base=15.0, cooldown_max=15.0, multiplier=1.0, jitter=0.0, successes=2),
    "exp. cooldown ±20 % jitter": dict(consecutive_failures=5, cooldown_base=5.0, cooldown_max=60.0, multiplier=2.0, jitter=0.2, successes=2),
    "jitter + 10 s ramp": dict(consecutive_failures=5, cooldown_base=5.0, cooldown_max=60.0, multiplier=2.0, jitter=0.2, successes=2, ramp=10.0),
}


def simulate(params: dict, seed: int = 1):
    rng = random.Random(seed)
    clock = weir.ManualClock()
    breakers = [weir.CircuitBreaker(clock=clock, seed=seed * 100 + i, **params) for i in range(INSTANCES)]
    t = 0.0
    sent, failed, short = Counter(), Counter(), Counter()
    served_in_bin = Counter()  # 100 ms bins, for the backend's capacity
    while t < END:
        t += rng.expovariate(RATE)
        clock.set(t)
        b = breakers[rng.randrange(INSTANCES)]
        sec = int(t)
        if not b.allow():
            short[sec] += 1
            continue
        sent[sec] += 1
        bin_ = int(t * 10)
        if served_in_bin[bin_] < backend_capacity(t) / 10:
            served_in_bin[bin_] += 1
            b.record_success()
        else:
            failed[sec] += 1
            b.record_failure()
    return breakers, sent, failed, short


def main() -> int:
    args, plt = _figure.setup(__doc__)

    results = {name: simulate(p) for name, p in CONFIGS.items()}
    fig, axes = plt.subplots(3, len(CONFIGS), figsize=(15, 8.5), sharex=True, sharey="row")
    level = {"closed": 0, "half_open": 1, "open": 2}
    secs = list(range(int(END)))
    for col, (name, (breakers, sent, failed, short)) in enumerate(results.items()):
        ax = axes[0][col]
        for i, b in enumerate(breakers):
            xs, ys = [0.0], [0]
            for at, _frm, to in b.transitions():
                xs += [at, at]
                ys += [ys[-1], level[to]]
            xs.append(END)
            ys.append(ys[-1])
            ax.plot(xs, [y + 0.06 * i for y in ys], lw=1.2, label=f"instance {i}")
        ax.set_yticks([0, 1, 2], ["closed", "half_open", "open"])
        ax.set_title(name)
        n_trips = sum(1 for b in breakers for _, _, to in b.transitions() if to == "open")
        ax.text(0.99, 0.5, f"{n_trips} trips to open", transform=ax.transAxes, ha="right", fontsize=9)
        ax = axes[1][col]
        ax.bar(secs, [sent[s] - failed[s] for s in secs], width=1.0, color="tab:green", label="served")
        ax.bar(secs, [failed[s] for s in secs], bottom=[sent[s] - failed[s] for s in secs], width=1.0, color="tab:red", label="failed")
        ax.plot(secs, [min(backend_capacity(s + 0.5), 400) for s in secs], "k--", lw=1, label="backend capacity")
        ax.set_ylim(0, 320)
        ax = axes[2][col]
        ax.bar(secs, [short[s] for s in secs], width=1.0, color="tab:gray", label="short-circuited")
        ax.set_xlabel("time (s)")
        for a in axes[:, col]:
            a.axvspan(HEALTHY_UNTIL, DEAD_UNTIL, color="tab:red", alpha=0.06)
    axes[0][0].set_ylabel("breaker state")
    axes[1][0].set_ylabel("backend calls / s")
    axes[2][0].set_ylabel("short-circuits / s")
    axes[0][0].legend(fontsize=7, loc="upper left")
    axes[1][0].legend(fontsize=7, loc="upper right")
    axes[2][0].legend(fontsize=7, loc="upper right")
    fig.suptitle("Seed 001: healthy 0–12 s, backend dead 12–40 s (shaded), cold restart at 40 s — 4 gateway instances, ~175 req/s")
    path = _figure.save(fig, args, "breaker.png")
    for name, (breakers, sent, failed, short) in results.items():
        print(f"{name:28s} backend calls {sum(sent.values()):6d}  failed {sum(failed.values()):5d}  "
              f"short-circuited {sum(short.values()):6d}  "
              f"trips {sum(1 for b in breakers for _, _, to in b.transitions() if to == 'open')}")
    return _figure.finish(path, args, plt)


if __name__ == "__main__":
    sys.exit(main())
