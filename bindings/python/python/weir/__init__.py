"""weir: rate limiters and resilience primitives with the exact decisions of weir's gateway.

Every decision is made by the Rust core (``weir-core``); this package only converts
arguments. Times are float seconds at the boundary, converted to whole nanoseconds by
rounding to the nearest nanosecond; NaN and negative values raise ``ValueError`` naming
the argument, values past ~584 years (``+inf`` included) saturate to "forever".

Run experiments on a :class:`ManualClock` (deterministic, no sleeping) or leave ``clock=None``
for the OS monotonic clock. See ``docs/PYTHON.md`` in the repository.
"""

from weir._weir import (
    Backoff,
    CircuitBreaker,
    Deadline,
    Decision,
    FixedWindow,
    InsufficientCapacity,
    LeakyBucket,
    MAX_SLIDING_LOG_LIMIT,
    ManualClock,
    Permit,
    Quota,
    RetryBudget,
    Semaphore,
    SlidingLog,
    SlidingWindow,
    TokenBucket,
    __version__,
)
from weir._replay import ReplayDecision, ReplayResult, replay
from weir._simulation import SimulatedRequest, Simulation, SimulationResult

# Everything imported above, in the order of dir(): the stub (__init__.pyi) spells the list
# out and tests/test_stubs.py checks that both agree.
__all__ = [name for name in dir() if not name.startswith("_")]
