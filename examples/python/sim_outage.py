"""An upstream outage through a route with a breaker, with and without ramp, on virtual time.

Traffic: a steady 200 req/s. The upstream refuses connections from t = 5 s to t = 15 s.
The breaker opens after 5 consecutive failures, cools down 2 s (doubling after each failed
recovery, up to 8 s), probes in HALF_OPEN and closes — at once, or over a 5 s ramp during
which the admitted share rises linearly (the rest answered `circuit_open`).

The plot shows, per 100 ms bin, the share of client requests by outcome: `proxied` (the
breaker CLOSED, or a probe), `upstream_unavailable` (attempts that met the outage), and
`circuit_open` (OPEN, or held back by the ramp) — the CLOSED → OPEN → HALF_OPEN → CLOSED
timeline as clients see it.

Usage: python examples/python/sim_outage.py [--out DIR]   (writes sim_outage.png)
"""

from __future__ import annotations

import sys

import numpy as np

import weir

import _figure  # examples/python/_figure.py
import _sim  # examples/python/_sim.py

END = 25.0
BIN = 0.1

CONFIG = _sim.config("""
[routes.breaker]
failure_on = ["5xx", "connect_failure", "timeout"]
consecutive_failures = 5
cooldown = { base = "2s", max = "8s", multiplier = 2.0, jitter = 0.0 }
half_open = { probes = 1, successes = 1 }
ramp = "RAMP"
""")

OUTCOMES = ("proxied", "upstream_unavailable", "circuit_open")


def main() -> int:
    args, plt = _figure.setup(__doc__)
    ts = np.arange(0, END, 1 / 200.0)
    bins = np.arange(0, END + BIN, BIN)
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for ax, ramp in zip(axes, ("0s", "5s")):
        sim = weir.Simulation(CONFIG.replace("RAMP", ramp), seed=1)
        sim.upstream("backend", latency=0.005, outages=[(5.0, 15.0)])
        r = sim.run(ts, "/api")
        reason = np.asarray(r.reason)
        total, _ = np.histogram(ts, bins)
        for o in OUTCOMES:
            n, _ = np.histogram(ts[reason == o], bins)
            ax.step(bins[:-1], n / np.maximum(total, 1), where="post", label=o)
        ax.axvspan(5.0, 15.0, color="grey", alpha=0.15, label="outage")
        ax.set_ylabel("share of requests")
        ax.set_title(f"ramp = {ramp}")
        ax.legend(loc="center right")
        print(f"ramp {ramp:3s}: {r.summary()['api']}")
    axes[1].set_xlabel("time (s)")
    fig.suptitle("Breaker over an outage (weir.Simulation, virtual time)")
    return _figure.finish(_figure.save(fig, args, "sim_outage.png"), args, plt)


if __name__ == "__main__":
    sys.exit(main())
