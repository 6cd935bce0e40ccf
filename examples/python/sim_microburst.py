"""Seed 004's micro-burst through two whole gateway configs, on virtual time.

Traffic: a steady ~800 req/s (Poisson, seeded) and, at t = 1 s, 2000 requests within 20 ms.
Both configs allow 1000 req/s on the route; the upstream answers in 5 ms.

1. *token bucket* (`rate = 1000, per = "1s", burst = 2000`): the full bucket lets the whole
   burst through at once.
2. *leaky bucket with a breaker* (`burst = 500, delay = 200`, `consecutive_failures = 5`):
   201 pass at once, 300 are held and released at the rate, the rest are rejected.

`weir.Simulation` runs every request through the gateways' own engine (the same steps as
`weir-gateway simulate`), so the held requests really wait: a request reaches the upstream
at arrival + queueing + shaping delay. The plot counts, per 10 ms bin, requests that reach
the upstream and client outcomes.

Usage: python examples/python/sim_microburst.py [--out DIR]   (writes sim_microburst.png)
"""

from __future__ import annotations

import sys

import numpy as np

import weir

import _figure  # examples/python/_figure.py
import _sim  # examples/python/_sim.py

LATENCY = 0.005
BIN = 0.010
END = 3.0

TOKEN = _sim.config(
    'rate_limit = { algorithm = "token_bucket", rate = 1000, per = "1s", burst = 2000, key = ["route"] }\n'
)
LEAKY = _sim.config(
    'rate_limit = { algorithm = "leaky_bucket", rate = 1000, per = "1s", burst = 500, delay = 200, key = ["route"] }\n'
    'breaker = { failure_on = ["5xx", "connect_failure", "timeout"], consecutive_failures = 5 }\n'
)


def trace(seed: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    steady = np.cumsum(rng.exponential(1 / 800.0, 3000))
    steady = steady[steady < END]
    burst = 1.0 + np.sort(rng.uniform(0, 0.020, 2000))
    return np.sort(np.concatenate([steady, burst]))


def main() -> int:
    args, plt = _figure.setup(__doc__)
    ts = trace()
    bins = np.arange(0, END + BIN, BIN)
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for name, cfg in (("token bucket (burst 2000)", TOKEN), ("leaky bucket + breaker (burst 500, delay 200)", LEAKY)):
        sim = weir.Simulation(cfg, seed=4).upstream("backend", latency=LATENCY)
        r = sim.run(ts, "/api")
        reason = np.asarray(r.reason)
        dur = np.asarray(r.duration)
        ok = reason == "proxied"
        # The request reached the upstream once its wait was over.
        at_upstream = ts[ok] + dur[ok] - LATENCY
        load, _ = np.histogram(at_upstream, bins)
        rejected, _ = np.histogram(ts[~ok], bins)
        axes[0].step(bins[:-1], load / BIN, where="post", label=name)
        axes[1].step(bins[:-1], rejected, where="post", label=name)
        s = r.summary()["api"]
        print(f"{name:48s} peak upstream load {load.max() / BIN:8.0f} req/s   outcomes {s}")
    axes[0].set_ylabel("upstream load (req/s, 10 ms bins)")
    axes[0].set_yscale("log")
    axes[1].set_ylabel("rejected per 10 ms")
    axes[1].set_xlabel("time (s)")
    for ax in axes:
        ax.legend(loc="upper right")
        ax.set_xlim(0.8, 1.6)
    fig.suptitle("Micro-burst through two gateway configs (weir.Simulation, virtual time)")
    return _figure.finish(_figure.save(fig, args, "sim_microburst.png"), args, plt)


if __name__ == "__main__":
    sys.exit(main())
