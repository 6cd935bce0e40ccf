"""Seed 004's micro-burst: a token bucket with a large burst vs a leaky bucket that shapes.

The gateway allows 1000 req/s. Traffic is a steady ~800 req/s (Poisson, seeded), and at
t = 1 s a client fires 2000 requests within 20 ms (a retry storm, a load-test tool).

1. *token bucket* `TokenBucket(1000, 1.0, 2000)` — the seed's Redis/Lua config
   (capacity 2000, rate 1000): after a quiet period the bucket is full, so the whole
   burst goes through at once — for the backend that is 100,000 req/s for 20 ms.
2. *leaky bucket* `LeakyBucket(1000, 1.0, 500, delay=200)` — the seed's fix, nginx
   `limit_req rate=1000r/s burst=500 delay=200`: 201 requests pass at once, the next 300
   are held (`allowed=True` with `.delay > 0`) and released at the rate, the rest rejected.

Both run through `weir.replay` on a manual clock: one call per trace, the exact decisions
of the gateway. A delayed request reaches the backend at arrival + delay. The plot counts,
per 10 ms bin, requests forwarded to the backend and requests rejected.

Usage: python examples/python/microburst.py [--out DIR]   (writes microburst.png; headless)
"""

from __future__ import annotations

import sys

import numpy as np

import weir

import _figure  # examples/python/_figure.py

RATE = 1000  # req/s the gateway allows
STEADY = 800.0  # req/s background traffic
BURST_AT, BURST_LEN, BURST_N = 1.0, 0.020, 2000
END = 3.0
BIN = 0.010  # seconds: the seed's advice — look at 10 ms, not at 1 s


def trace(seed: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    steady = np.cumsum(rng.exponential(1.0 / STEADY, int(STEADY * END * 1.2)))
    steady = steady[steady < END]
    burst = BURST_AT + np.sort(rng.uniform(0.0, BURST_LEN, BURST_N))
    return np.sort(np.concatenate([steady, burst]))


LIMITERS = {
    "token bucket: rate 1000/s, burst 2000": lambda c: weir.TokenBucket(RATE, 1.0, 2000, clock=c),
    "leaky bucket: rate 1000/s, burst 500, delay 200": lambda c: weir.LeakyBucket(RATE, 1.0, 500, delay=200, clock=c),
}


def run(make, ts: np.ndarray) -> dict:
    lim = make(weir.ManualClock())
    cols = weir.replay(lim, ts).to_numpy()
    ok = cols["allowed"]
    sent_at = ts[ok] + cols["delay"][ok]  # when the backend sees each admitted request
    edges = np.arange(0.0, END + 1.0 + BIN / 2, BIN)
    forwarded, _ = np.histogram(sent_at, edges)
    rejected, _ = np.histogram(ts[~ok], edges)
    return {
        "edges": edges,
        "forwarded": forwarded,
        "rejected": rejected,
        "delay": cols["delay"],
        "admitted": int(ok.sum()),
        "n_rejected": int((~ok).sum()),
        "peak": int(forwarded.max()),
    }


def main() -> int:
    args, plt = _figure.setup(__doc__)

    ts = trace()
    results = {name: run(make, ts) for name, make in LIMITERS.items()}
    arrivals, _ = np.histogram(ts, next(iter(results.values()))["edges"])

    lo, hi = 0.8, 2.8
    fig, axes = plt.subplots(2, 2, figsize=(14, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    for col, (name, r) in enumerate(results.items()):
        x = r["edges"][:-1]
        sel = (x >= lo) & (x < hi)
        ax = axes[0][col]
        ax.bar(x[sel], r["forwarded"][sel], width=BIN, align="edge", color="tab:green", label="forwarded to backend")
        ax.bar(x[sel], r["rejected"][sel], width=BIN, align="edge", bottom=r["forwarded"][sel], color="tab:red", alpha=0.7, label="rejected (429)")
        ax.step(x[sel], arrivals[sel], where="post", color="k", lw=0.8, label="arrivals")
        ax.axhline(RATE * BIN, color="tab:blue", ls="--", lw=1, label=f"the rate: {RATE * BIN:.0f} per 10 ms")
        ax.set_yscale("symlog", linthresh=20)
        ax.set_ylim(0, 2000)
        ax.set_title(name)
        ax.text(0.99, 0.97, f"peak {r['peak']} to the backend in 10 ms\n"
                f"admitted {r['admitted']}, rejected {r['n_rejected']}",
                transform=ax.transAxes, ha="right", va="top", fontsize=9)
        ax = axes[1][col]
        d = r["delay"]
        ax.plot(ts, d * 1e3, ".", ms=2, color="tab:blue")
        ax.set_xlabel("arrival time (s)")
        ax.set_ylim(-10, 350)
        if d.max() == 0:
            ax.text(0.5, 0.5, "no shaping: every admitted request passes at once",
                    transform=ax.transAxes, ha="center", fontsize=9)
    axes[0][0].set_ylabel("requests per 10 ms (symlog)")
    axes[1][0].set_ylabel("delay imposed (ms)")
    axes[0][0].legend(fontsize=8, loc="upper left")
    axes[0][0].set_xlim(lo, hi)
    fig.suptitle(f"Seed 004: {BURST_N} requests in {BURST_LEN * 1e3:.0f} ms at t = {BURST_AT:.0f} s "
                 f"on top of ~{STEADY:.0f} req/s — per-10 ms view")
    path = _figure.save(fig, args, "microburst.png")
    for name, r in results.items():
        print(f"{name:48s} peak/10 ms {r['peak']:5d}  admitted {r['admitted']:5d}  "
              f"rejected {r['n_rejected']:5d}  max delay {r['delay'].max() * 1e3:6.1f} ms")
    return _figure.finish(path, args, plt)


if __name__ == "__main__":
    sys.exit(main())
