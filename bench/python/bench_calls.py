"""Per-call cost of weir's Python binding against same-run baselines and the Python peers.

The machine this runs on is usually shared, so every figure is a median over interleaved
rounds (every row once per round) and is reported twice: per-process **CPU time**
(`time.process_time_ns`, user + system: what the call costs while it runs) and **wall
time** (`perf_counter_ns`, which also counts the time other processes held the core).
Ratios within one run are the figures to trust.

Per-call rows (each on its admitting path):
  python noop          a Python call of an empty function (the loop + call floor)
  pyo3 noop()          an empty pyo3 method without arguments (METH_NOARGS)
  pyo3 noop_arg()      an empty pyo3 method with try_acquire's `cost=None` parameter: under
                       abi3-py39 such a method uses the tuple/dict calling convention
  pyo3 -> Decision     a pyo3 method returning a new weir.Decision (the result object)
  weir <Limiter>       .try_acquire() on the monotonic clock (TokenBucket also on a manual one)
  pure-Python GCRA     a 10-line token bucket in Python on time.monotonic()
  pyrate-limiter       Limiter(Rate(...)).try_acquire("k", blocking=False)   (its default bucket)
  limits fixed/sliding limits FixedWindow/SlidingWindowCounter RateLimiter on MemoryStorage

Replay rows: a sorted trace of float64 seconds (numpy, ~10 k events/s) through each
limiter on a ManualClock, decisions per second, against
  Rust core loop       _weir._bench_core_loop: the loop a Rust program would write over
                       SharedTokenBucket::acquire (no validation, no output), same trace
  output-memory floor  touching 17 fresh bytes per event (replay's output size), the part
                       of replay's cost that is page faults and memory writes
  numpy add            one streaming numpy pass over the trace

The baselines `_weir._Probe` and `_weir._bench_core_loop` exist only in a build with the
`bench-hooks` feature (the shipped module leaves them out); build that first:

  (cd bindings/python && maturin develop --release --features bench-hooks)

`--replay-only` times just the `weir.replay` rows, `--rounds` rounds of them, without the
baselines (so the shipped module, without bench hooks, will do).

Usage: python bench/python/bench_calls.py [--rounds 7] [--quick] [--replay-only] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import weir
from weir import _weir

if not hasattr(_weir, "_Probe") and "--replay-only" not in sys.argv:
    sys.exit(
        "bench_calls.py needs the benchmark hooks: build the module with\n"
        "  (cd bindings/python && maturin develop --release --features bench-hooks)"
    )


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

    probe = _weir._Probe()
    out["python noop (call floor)"] = noop
    out["pyo3 noop()"] = probe.noop
    out["pyo3 noop_arg() (cost=None param)"] = probe.noop_arg
    out["pyo3 -> new Decision"] = probe.decision
    out["weir TokenBucket"] = weir.TokenBucket(big, 1.0, 2**40).try_acquire
    out["weir TokenBucket (manual clock)"] = weir.TokenBucket(big, 1.0, 2**40, clock=weir.ManualClock()).try_acquire
    out["weir LeakyBucket"] = weir.LeakyBucket(big, 1.0, 2**40, nodelay=True).try_acquire
    out["weir FixedWindow"] = weir.FixedWindow(2**32 - 1, 1.0).try_acquire
    out["weir SlidingWindow"] = weir.SlidingWindow(2**24 - 1, 1.0).try_acquire
    out["weir SlidingLog (32768 per 1 ms)"] = weir.SlidingLog(32768, 0.001).try_acquire
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


def per_call(f, n: int):
    w0, c0 = time.perf_counter_ns(), time.process_time_ns()
    for _ in range(n):
        f()
    return (time.process_time_ns() - c0) / n, (time.perf_counter_ns() - w0) / n


def bench_calls(rounds: int, quick: bool) -> dict:
    fs = rows()
    slow = {"pyrate-limiter", "limits fixed window", "limits sliding counter"}
    cpu = {k: [] for k in fs}
    wall = {k: [] for k in fs}
    for k, f in fs.items():  # warm-up
        per_call(f, 2000)
    for _ in range(rounds):
        for k, f in fs.items():
            n = (20_000 if k in slow else 200_000) // (10 if quick else 1)
            c, w = per_call(f, n)
            cpu[k].append(c)
            wall[k].append(w)
    return {k: (statistics.median(cpu[k]), statistics.median(wall[k])) for k in fs}


REPLAYED = {
    "TokenBucket(5000/s, burst 100)": lambda c: weir.TokenBucket(5000, 1.0, 100, clock=c),
    "LeakyBucket(5000/s, burst 100, delay 50)": lambda c: weir.LeakyBucket(5000, 1.0, 100, delay=50, clock=c),
    "FixedWindow(5000 per 1 s)": lambda c: weir.FixedWindow(5000, 1.0, clock=c),
    "SlidingWindow(5000 per 1 s)": lambda c: weir.SlidingWindow(5000, 1.0, clock=c),
    "SlidingLog(5000 per 1 s)": lambda c: weir.SlidingLog(5000, 1.0, clock=c),
}


def timed(f):
    w0, c0 = time.perf_counter(), time.process_time()
    f()
    return time.process_time() - c0, time.perf_counter() - w0


def bench_replay(rounds: int, quick: bool, replay_only: bool = False) -> dict:
    try:
        import numpy as np
    except ImportError:
        return {}
    n = 1_000_000 if quick else 10_000_000
    ts = np.cumsum(np.random.default_rng(4).exponential(1e-4, n))  # ~10k events/s
    raw = ts.tobytes()
    out = np.empty_like(ts)
    res: dict = {}

    def add(name, t):
        res.setdefault(name, ([], []))
        res[name][0].append(n / t[0])
        res[name][1].append(n / t[1])

    for _ in range(rounds):
        if not replay_only:  # the baselines (the hooks are there: checked at import)
            add("Rust core loop (SharedTokenBucket, no output)", timed(lambda: _weir._bench_core_loop(raw, 5000, 10**9, 100)))
            add("output-memory floor (17 fresh bytes/event)", timed(lambda: bytearray(b"\x01") * (17 * n)))
            add("numpy add (one streaming pass)", timed(lambda: np.add(ts, 1.0, out=out)))
            tb = weir.TokenBucket(5000, 1.0, 100, clock=weir.ManualClock())
            add("TokenBucket: _replay core call (input already bytes)", timed(lambda: _weir._replay(tb, raw, None)))
        for name, make in REPLAYED.items():
            lim = make(weir.ManualClock())
            add(f"weir.replay {name}", timed(lambda: weir.replay(lim, ts)))
    return {"events": n, "per_s": {k: (statistics.median(c), statistics.median(w)) for k, (c, w) in res.items()}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--replay-only", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    calls = {} if a.replay_only else bench_calls(a.rounds, a.quick)
    replay = bench_replay(a.rounds if a.replay_only else max(3, a.rounds // 2), a.quick, a.replay_only)
    try:
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
    except OSError:
        load = "?"
    print(f"# {time.strftime('%Y-%m-%d')} {platform.python_implementation()} {platform.python_version()} "
          f"{platform.machine()}, {a.rounds} interleaved rounds, medians, load average {load}")
    if calls:
        ref_c, ref_w = calls["weir TokenBucket"]
        print(f"{'row':40s} {'CPU ns':>9s} {'× weir TB':>9s} {'wall ns':>9s} {'× weir TB':>9s}")
        for k, (c, w) in calls.items():
            print(f"{k:40s} {c:9.1f} {c / ref_c:9.2f} {w:9.1f} {w / ref_w:9.2f}")
    if replay:
        print(f"replay, {replay['events']:,} events: M decisions/s (CPU time, wall time)")
        for k, (c, w) in replay["per_s"].items():
            print(f"  {k:62s} {c / 1e6:7.1f} {w / 1e6:7.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"calls_ns_cpu_wall": calls, "replay": replay, "load": load}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
