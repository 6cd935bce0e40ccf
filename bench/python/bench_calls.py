"""Per-call cost of weir's Python binding against the Python peers, in one run.

Rows (each admitting: limits are set so nothing is rejected, i.e. the common path):
  noop               a Python call of an empty function (the loop + call floor)
  weir TokenBucket   weir.TokenBucket.try_acquire() on the OS monotonic clock
  weir (manual clk)  the same on a weir.ManualClock
  pure-Python GCRA   a 10-line token bucket in Python on time.monotonic()
  pyrate-limiter     Limiter(Rate(...)).try_acquire("k", blocking=False)   (its default bucket)
  limits fixed       limits FixedWindowRateLimiter(MemoryStorage()).hit(item, "k")
  limits sliding     limits SlidingWindowCounterRateLimiter(...).hit(item, "k")
Rounds are interleaved (every row once per round) and medians reported, because the
machine is shared; ratios within one run are the figures to trust.

Then weir.replay throughput: a sorted trace of float64 seconds (numpy) through a token
bucket on a ManualClock, decisions per second (median of rounds), with and without
the input conversion.

Usage: python bench/python/bench_calls.py [--rounds 7] [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import weir


class PyGcra:
    def __init__(self, rate: float, per: float, burst: int):
        self.t = per / rate
        self.w = burst * self.t
        self.tat = 0.0

    def try_acquire(self) -> bool:
        now = time.monotonic()
        tat = self.tat if self.tat > now else now
        if tat + self.t - now <= self.w:
            self.tat = tat + self.t
            return True
        return False


def rows():
    big = 10**9
    out = {}

    def noop():
        pass

    out["noop (call floor)"] = noop
    out["weir TokenBucket"] = weir.TokenBucket(big, 1.0, 10**6).try_acquire
    out["weir TokenBucket (manual clock)"] = weir.TokenBucket(big, 1.0, 10**6, clock=weir.ManualClock()).try_acquire
    out["pure-Python GCRA bucket"] = PyGcra(big, 1.0, 10**6).try_acquire
    try:
        from pyrate_limiter import Duration, Limiter, Rate

        lim = Limiter(Rate(big, Duration.SECOND))
        out["pyrate-limiter"] = lambda: lim.try_acquire("k", blocking=False)
    except ImportError:
        print("pyrate-limiter not installed: row skipped", file=sys.stderr)
    try:
        from limits import RateLimitItemPerSecond, storage, strategies

        item = RateLimitItemPerSecond(big)
        fw = strategies.FixedWindowRateLimiter(storage.MemoryStorage())
        sw = strategies.SlidingWindowCounterRateLimiter(storage.MemoryStorage())
        out["limits fixed window"] = lambda: fw.hit(item, "k")
        out["limits sliding counter"] = lambda: sw.hit(item, "k")
    except ImportError:
        print("limits not installed: rows skipped", file=sys.stderr)
    return out


def per_call(f, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        f()
    return (time.perf_counter_ns() - t0) / n


def bench_calls(rounds: int, quick: bool) -> dict:
    fs = rows()
    fast = {"noop (call floor)", "weir TokenBucket", "weir TokenBucket (manual clock)", "pure-Python GCRA bucket"}
    res = {k: [] for k in fs}
    for k, f in fs.items():  # warm-up
        per_call(f, 2000)
    for _ in range(rounds):
        for k, f in fs.items():
            n = (200_000 if k in fast else 20_000) // (10 if quick else 1)
            res[k].append(per_call(f, n))
    return {k: statistics.median(v) for k, v in res.items()}


def bench_replay(rounds: int, quick: bool) -> dict:
    try:
        import numpy as np
    except ImportError:
        return {}
    n = 1_000_000 if quick else 10_000_000
    ts = np.cumsum(np.random.default_rng(4).exponential(1e-4, n))  # ~10k events/s
    raw, conv, floor = [], [], []
    out = np.empty_like(ts)
    for _ in range(rounds):
        # A physical baseline in the same run: one streaming numpy pass (read 8 B, write 8 B).
        t0 = time.perf_counter()
        np.add(ts, 1.0, out=out)
        floor.append(n / (time.perf_counter() - t0))
        tb = weir.TokenBucket(5000, 1.0, 100, clock=weir.ManualClock())
        b = ts.tobytes()
        t0 = time.perf_counter()
        weir._weir._replay(tb, b, None)
        raw.append(n / (time.perf_counter() - t0))
        tb = weir.TokenBucket(5000, 1.0, 100, clock=weir.ManualClock())
        t0 = time.perf_counter()
        r = weir.replay(tb, ts)
        conv.append(n / (time.perf_counter() - t0))
    return {"events": n, "decisions_per_s_core_loop": statistics.median(raw),
            "decisions_per_s_replay_call": statistics.median(conv), "admitted": r.admitted,
            "numpy_add_elems_per_s": statistics.median(floor)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    calls = bench_calls(a.rounds, a.quick)
    replay = bench_replay(max(3, a.rounds // 2), a.quick)
    weir_ns = calls["weir TokenBucket"]
    print(f"# {time.strftime('%Y-%m-%d')} {platform.python_implementation()} {platform.python_version()} "
          f"{platform.machine()}, {a.rounds} interleaved rounds, medians")
    print(f"{'row':36s} {'ns/call':>9s} {'× weir':>8s}")
    for k, v in calls.items():
        print(f"{k:36s} {v:9.1f} {v / weir_ns:8.2f}")
    if replay:
        print(f"replay: {replay['events']:,} events, core loop {replay['decisions_per_s_core_loop'] / 1e6:.1f} M decisions/s, "
              f"weir.replay() incl. conversion {replay['decisions_per_s_replay_call'] / 1e6:.1f} M/s; "
              f"baseline numpy add {replay['numpy_add_elems_per_s'] / 1e6:.0f} M elements/s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"calls_ns": calls, "replay": replay}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
