"""``weir.Simulation``: a whole config on virtual time (see ``docs/PYTHON.md``)."""

from __future__ import annotations

import os
from typing import Any, Iterator, Mapping, NamedTuple, Optional, Sequence

from weir import _weir


#: One simulated request: what the client got (`queue` and `duration` in seconds).
SimulatedRequest = NamedTuple(
    "SimulatedRequest",
    [("t", float), ("route", str), ("status", int), ("reason", str), ("attempts", int), ("queue", float), ("duration", float)],
)


class SimulationResult:
    """The records of a run, one column per field, in request order.

    ``status`` (``'H'``, uint16), ``attempts`` (``'I'``, uint32), ``duration`` and ``queue``
    (``'d'``, seconds) are read-only ``memoryview``s (zero-copy into ``numpy.asarray``);
    ``route`` (``-`` for no route) and ``reason`` (the ``outcome`` label of
    ``weir_requests_total``: ``proxied``, ``rate_limited``, ...) are lists of ``str``.
    ``result[i]`` is a :class:`SimulatedRequest`; iteration yields them.
    """

    __slots__ = ("t", "status", "attempts", "duration", "queue", "route", "reason")

    def __init__(self, t: Any, cols: tuple):
        status, attempts, duration, queue, route, reason = cols
        self.t = t
        self.status = memoryview(status).cast("H")
        self.attempts = memoryview(attempts).cast("I")
        self.duration = memoryview(duration).cast("d")
        self.queue = memoryview(queue).cast("d")
        self.route = route
        self.reason = reason

    def __len__(self) -> int:
        return len(self.route)

    def __getitem__(self, i: int) -> SimulatedRequest:
        return SimulatedRequest(
            float(self.t[i]),
            self.route[i],
            self.status[i],
            self.reason[i],
            self.attempts[i],
            self.queue[i],
            self.duration[i],
        )

    def __iter__(self) -> Iterator[SimulatedRequest]:
        return (self[i] for i in range(len(self)))

    def summary(self) -> dict:
        """``{route: {outcome: count}}``."""
        out: dict = {}
        for route, reason in zip(self.route, self.reason):
            per = out.setdefault(route, {})
            per[reason] = per.get(reason, 0) + 1
        return out

    def to_pandas(self) -> Any:
        """The records as a ``pandas.DataFrame`` (needs pandas; weir never requires it)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "t": list(self.t),
                "route": self.route,
                "status": list(self.status),
                "reason": self.reason,
                "attempts": list(self.attempts),
                "queue": list(self.queue),
                "duration": list(self.duration),
            }
        )

    def __repr__(self) -> str:
        return f"SimulationResult(requests={len(self)})"


class Simulation:
    """A gateway config run on virtual time against simulated upstreams.

    ``config`` is a path to a TOML file or the TOML text itself. Every request goes
    through the gateways' own engine (rate limit with its delays, concurrency queue,
    breaker, per-try timeouts, retries with backoff, fallback) on a manual clock that
    jumps from event to event; ``seed`` fixes every random choice. Upstreams default to
    1 ms latency, no errors. ``start`` is the wall time (Unix seconds) at the trace's time
    zero — the calendar of quota periods and token expiry, which then moves with simulated
    time (default: now); give it for runs that must repeat on any day.
    """

    def __init__(self, config: str, seed: int = 0, start: Optional[float] = None):
        if not isinstance(config, str):
            raise TypeError(f"config must be a path or TOML text (str), not {type(config).__name__}")
        if "\n" not in config and (os.path.exists(config) or config.endswith(".toml")):
            try:
                with open(config, encoding="utf-8") as f:
                    text, origin = f.read(), config
            except OSError as e:
                raise ValueError(f"config: cannot read {config}: {e}") from None
        else:
            text, origin = config, "<config>"
        if not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"seed must be an integer in 0..2**64, got {seed!r}")
        if start is not None and (
            isinstance(start, bool) or not isinstance(start, (int, float)) or not 0 <= start < 2**63 / 1e9
        ):
            raise ValueError(f"start must be Unix seconds >= 0 (a number), got {start!r}")
        self._sim = _weir._Simulation(text, origin, seed, None if start is None else float(start))

    def upstream(
        self,
        name: str,
        latency: Any = 0.02,
        errors: float = 0.0,
        outages: Sequence[tuple] = (),
    ) -> "Simulation":
        """Sets how upstream ``name`` behaves: ``latency`` seconds (a number, or a sequence
        used in order, one per attempt, cycling), ``errors`` the probability that an
        answer is a 503, ``outages`` ``[(start, end), ...]`` seconds in which connections
        are refused. Returns the simulation (calls chain)."""
        if isinstance(latency, (int, float)):
            lat = [float(latency)]
        else:
            lat = [float(x) for x in latency]
            if not lat:
                raise ValueError("latency must be a number or a non-empty sequence")
        if not 0.0 <= float(errors) <= 1.0:
            raise ValueError(f"errors must be a probability in 0..1, got {errors!r}")
        wins = [(float(a), float(b)) for a, b in outages]
        self._sim.upstream(name, lat, float(errors), wins)
        return self

    def run(
        self,
        times: Any,
        paths: Any,
        methods: Optional[Sequence[str]] = None,
        headers: Any = None,
    ) -> SimulationResult:
        """Runs requests arriving at ``times`` (seconds, any order) for ``paths`` (a
        sequence, or one str for every request), with ``methods`` (default GET) and
        ``headers`` (one dict for every request, or one dict per request). Each run starts
        from a fresh engine: runs do not share state."""
        # Lists go to the native side as they are (it reads each item once); numpy arrays
        # through their C-speed ``tolist``.
        ts = _as_list(times)
        ps = paths if isinstance(paths, str) else _as_list(paths)
        ms = methods if methods is None or isinstance(methods, str) else _as_list(methods)
        if headers is None:
            hs: list = []
        elif isinstance(headers, Mapping):
            hs = [headers if type(headers) is dict else dict(headers)]
        else:
            hs = [h if type(h) is dict else dict(h) for h in headers]
            if len(hs) != len(ts):
                raise ValueError(f"headers has {len(hs)} items but times has {len(ts)}")
        # (A copy of a list the caller owns: the result must not change with it.)
        return SimulationResult(list(ts) if ts is times else ts, self._sim.run(ts, ps, ms, hs))


def _as_list(v: Any) -> list:
    if type(v) is list:
        return v
    tolist = getattr(v, "tolist", None)
    return tolist() if callable(tolist) else list(v)
