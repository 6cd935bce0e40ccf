"""weir.Simulation throughput: simulated requests per second through one route with a
token-bucket rate limit and a breaker (the latest figure is in docs/BENCHMARKS.md, the first
in docs/perf-log/2026-12-02-simulation-first-figure.md).

    python bench/python/bench_simulation.py [--requests N] [--rounds R]

Prints the median of R rounds of simulated requests per CPU second (`time.process_time`: on
a shared, loaded machine wall time mostly measures the other processes): the whole `run`
call (argument conversion, the virtual-time run without the GIL, the result columns); the
engine part alone is `bench/examples/simulate.rs`.
"""

import argparse
import statistics
import time

import weir

# One route with a token bucket and a breaker (inline tables: the same as [[routes]] sections).
CONFIG = """
server = { listen = "127.0.0.1:8080" }
upstreams = [{ name = "up", endpoints = ["127.0.0.1:9"] }]
routes = [{ id = "api", match = { path_prefix = "/api" }, upstream = "up",
  rate_limit = { algorithm = "token_bucket", rate = 5000, per = "1s", burst = 100, key = ["route"] },
  breaker = { failure_on = ["5xx", "connect_failure"], consecutive_failures = 5, cooldown = { base = "1s", max = "10s" } } }]
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    n = a.requests
    # 10 000 requests/s offered against a 5 000/s limit; 1 % upstream errors.
    times = [i * 1e-4 for i in range(n)]
    sim = weir.Simulation(CONFIG, seed=1).upstream("up", latency=0.002, errors=0.01)
    rates = []
    for _ in range(a.rounds):
        t0 = time.process_time()
        r = sim.run(times, "/api")
        rates.append(n / (time.process_time() - t0))
    s = r.summary()["api"]
    print(f"{n:,} requests over {times[-1]:.0f} s of virtual time: {s}")
    print(f"simulated requests per CPU second (median of {a.rounds}): "
          f"{statistics.median(rates) / 1e6:.2f} M "
          f"(rounds: {', '.join(f'{x / 1e6:.2f}' for x in rates)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
