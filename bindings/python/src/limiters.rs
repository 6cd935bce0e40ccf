//! The rate limiters: each class wraps a core limiter and a clock.
//!
//! The glue does three things only: read the clock, convert `cost`, wrap the core's
//! [`weir_core::Decision`]. A new limiter starts full (idle, empty) at its clock's current
//! time. Token bucket, leaky bucket and both window counters wrap the core's lock-free
//! shared forms (one `AtomicU64` each); the sliding log has only a single-owner form in the
//! core (a multi-word ring), so it lives under a `Mutex` here.

use crate::decision::{PyDecision, issue};
use crate::errors;
use crate::fill::{Fill, PyLimiter};
use crate::time::{PyManualClock, TimeSource, to_positive_nanos, to_secs};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::{Mutex, MutexGuard};
use weir_core::window::{MAX_FIXED_LIMIT, MAX_SLIDING_LIMIT};
use weir_core::{
    Decision, InsufficientCapacity, Limit, Nanos, SharedFixedWindow, SharedLeakyBucket,
    SharedRateLimiter, SharedSlidingWindow, SharedTokenBucket, SlidingLog,
};

/// `cost=` argument: default 1; negative/huge → ValueError, non-int → TypeError.
#[inline]
fn cost_arg(cost: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    match cost {
        None => Ok(1),
        Some(c) => match c.extract::<u64>() {
            Ok(n) => Ok(n),
            Err(_) => errors::count("cost", c),
        },
    }
}

/// A core outcome as a Python result.
#[inline]
fn wrap(py: Python<'_>, r: Result<Decision, InsufficientCapacity>) -> PyResult<Py<PyDecision>> {
    match r {
        Ok(d) => issue(py, d),
        Err(e) => Err(errors::insufficient(py, e)),
    }
}

/// `remaining` right now, for reprs.
fn remaining_now(r: Result<Decision, InsufficientCapacity>) -> u64 {
    r.map(|d| d.remaining).unwrap_or(0)
}

/// The methods every limiter class has (`try_acquire`, `peek`, `capacity`, `clock`), plus
/// the class's read-only `getters` (`name: type = expression of $s`), for a window-style
/// class its constructor `(limit, window, clock=None)` (`window_args` with `$max`, `$name`,
/// then `$build` of the checked values), and its own `extra` items, in one `#[pymethods]`
/// block. `$core` is an expression of `self` with a `SharedRateLimiter`-like
/// `acquire`/`peek`/`capacity`.
macro_rules! limiter_methods {
    (
        $ty:ty,
        |$s:ident| $core:expr,
        getters { $($g:ident: $gt:ty = $gv:expr),* $(,)? },
        $(window_new($max:expr, $name:expr, |$l:ident, $w:ident, $c:ident| $build:block),)?
        { $($extra:tt)* }
    ) => {
        #[pymethods]
        impl $ty {
            /// Takes `cost` (default 1) now if it fits; returns a `Decision`.
            #[pyo3(signature = (cost = None), text_signature = "($self, cost=1)")]
            fn try_acquire(
                &self,
                py: Python<'_>,
                cost: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<Py<PyDecision>> {
                let $s = self;
                let cost = cost_arg(cost)?;
                wrap(py, $core.acquire(self.clock.now(), cost))
            }

            /// The decision `try_acquire(cost)` would return now, consuming nothing.
            #[pyo3(signature = (cost = None), text_signature = "($self, cost=1)")]
            fn peek(&self, py: Python<'_>, cost: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyDecision>> {
                let $s = self;
                let cost = cost_arg(cost)?;
                wrap(py, $core.peek(self.clock.now(), cost))
            }

            /// The largest cost ever admissible at once.
            #[getter]
            fn capacity(&self) -> u64 {
                let $s = self;
                $core.capacity()
            }

            /// The `ManualClock` this limiter reads, or `None` for the monotonic clock.
            #[getter]
            fn clock(&self, py: Python<'_>) -> Option<Py<PyManualClock>> {
                self.clock.py_object(py)
            }

            $(
                #[getter]
                fn $g(&self) -> $gt {
                    let $s = self;
                    $gv
                }
            )*

            $(
                #[new]
                #[pyo3(signature = (limit, window, clock = None))]
                fn new(
                    limit: &Bound<'_, PyAny>,
                    window: f64,
                    clock: Option<&Bound<'_, PyAny>>,
                ) -> PyResult<Self> {
                    let ($l, $w) = window_args(limit, window, $max, $name)?;
                    let $c = TimeSource::from_arg(clock)?;
                    $build
                }
            )?

            $($extra)*
        }
    };
}

/// `PyLimiter` for a class over a lock-free shared core in field `core`.
/// `fill` optionally overrides how a chunk is replayed (default: `acquire` per event).
macro_rules! shared_replay {
    ($ty:ty) => {
        impl PyLimiter for $ty {
            fn time(&self) -> &TimeSource {
                &self.clock
            }
            fn capacity(&self) -> u64 {
                SharedRateLimiter::capacity(&self.core)
            }
            #[inline]
            fn fill(&self, f: Fill<'_>) -> (u64, u64, Nanos) {
                f.batch(&self.core)
            }
        }
    };
}

/// `limiter_methods!` plus what both buckets have: `reset()` (documented by `$reset_doc`),
/// the `rate`, `per`, `burst` getters and `__repr__` (`$name(rate=.., per=.., burst=..`,
/// then the text `$more` of the config `$c`, then `remaining` and `clock`).
macro_rules! bucket_methods {
    ($ty:ty, $name:literal, $reset_doc:literal, |$c:ident| $more:expr, { $($extra:tt)* }) => {
        limiter_methods!($ty, |s| s.core, getters {
            rate: u64 = s.core.config().rate(),
            per: f64 = to_secs(s.core.config().per()),
            burst: u64 = s.core.config().burst(),
        }, {
            #[doc = $reset_doc]
            fn reset(&self) {
                self.core.reset(self.clock.now());
            }

            fn __repr__(&self) -> String {
                let $c = self.core.config();
                format!(
                    "{}(rate={}, per={:?}, burst={}{}, remaining={}, clock={})",
                    $name,
                    $c.rate(),
                    to_secs($c.per()),
                    $c.burst(),
                    $more,
                    remaining_now(self.core.peek(self.clock.now(), 0)),
                    self.clock.describe()
                )
            }

            $($extra)*
        });
    };
}

// ---- TokenBucket --------------------------------------------------------------------------

/// `weir.TokenBucket(rate, per, burst, clock=None)`: `rate` admissions per `per` seconds,
/// at most `burst` at once (GCRA, exact integer arithmetic).
#[pyclass(frozen, module = "weir", name = "TokenBucket")]
pub(crate) struct PyTokenBucket {
    core: SharedTokenBucket,
    clock: TimeSource,
}

// One CAS per batch of events instead of one per admission (see `Fill::batch`).
shared_replay!(PyTokenBucket);

bucket_methods!(
    PyTokenBucket,
    "TokenBucket",
    "Makes the bucket full now.",
    |_c| "",
    {
        #[new]
        #[pyo3(signature = (rate, per, burst, clock = None))]
        fn new(
            rate: &Bound<'_, PyAny>,
            per: f64,
            burst: &Bound<'_, PyAny>,
            clock: Option<&Bound<'_, PyAny>>,
        ) -> PyResult<Self> {
            let rate = errors::positive_count("rate", rate)?;
            let per = to_positive_nanos("per", per)?;
            let burst = errors::positive_count("burst", burst)?;
            let clock = TimeSource::from_arg(clock)?;
            let core = match Limit::token_bucket(rate, per, burst).map_err(errors::config)? {
                Limit::TokenBucket(c) => SharedTokenBucket::from_config(c),
                _ => unreachable!("a token-bucket limit"),
            };
            core.reset(clock.now());
            Ok(PyTokenBucket { core, clock })
        }

        /// Gives back up to `n` tokens (e.g. for a request that was never sent), never beyond full.
        #[pyo3(signature = (n = None), text_signature = "($self, n=1)")]
        fn refund(&self, n: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
            let n = cost_arg(n)?;
            self.core.refund(self.clock.now(), n);
            Ok(())
        }
    }
);

// ---- LeakyBucket --------------------------------------------------------------------------

/// `weir.LeakyBucket(rate, per, burst, delay=0, nodelay=False, clock=None)`: nginx
/// `limit_req` in exact arithmetic. `rate` requests per `per` seconds; up to `burst` excess
/// requests are accepted, the first `delay` of them at once and the rest with a `.delay`
/// (`nodelay` passes them all at once); beyond that, rejected.
#[pyclass(frozen, module = "weir", name = "LeakyBucket")]
pub(crate) struct PyLeakyBucket {
    core: SharedLeakyBucket,
    clock: TimeSource,
}

shared_replay!(PyLeakyBucket);

bucket_methods!(
    PyLeakyBucket,
    "LeakyBucket",
    "Makes the bucket idle (no excess) now.",
    |c| format!(
        ", delay={}, nodelay={}",
        c.delay(),
        if c.nodelay() { "True" } else { "False" }
    ),
    {
        #[new]
        #[pyo3(
        signature = (rate, per, burst, delay = None, nodelay = false, clock = None),
        text_signature = "(rate, per, burst, delay=0, nodelay=False, clock=None)"
    )]
        fn new(
            rate: &Bound<'_, PyAny>,
            per: f64,
            burst: &Bound<'_, PyAny>,
            delay: Option<&Bound<'_, PyAny>>,
            nodelay: bool,
            clock: Option<&Bound<'_, PyAny>>,
        ) -> PyResult<Self> {
            let rate = errors::positive_count("rate", rate)?;
            let per = to_positive_nanos("per", per)?;
            let burst = errors::count("burst", burst)?;
            let delay = match delay {
                Some(d) => errors::count("delay", d)?,
                None => 0,
            };
            let clock = TimeSource::from_arg(clock)?;
            let core = match Limit::leaky_bucket(rate, per, burst, delay, nodelay)
                .map_err(errors::config)?
            {
                Limit::LeakyBucket(c) => SharedLeakyBucket::from_config(c),
                _ => unreachable!("a leaky-bucket limit"),
            };
            core.reset(clock.now());
            Ok(PyLeakyBucket { core, clock })
        }

        #[getter]
        fn delay(&self) -> u64 {
            self.core.config().delay()
        }
        #[getter]
        fn nodelay(&self) -> bool {
            self.core.config().nodelay()
        }
    }
);

// ---- FixedWindow / SlidingWindow ------------------------------------------------------------

/// `limit` and `window` of a window limiter, validated with messages naming them.
fn window_args(
    limit: &Bound<'_, PyAny>,
    window: f64,
    max_limit: u64,
    class: &str,
) -> PyResult<(u64, Nanos)> {
    let limit = errors::positive_count("limit", limit)?;
    if limit > max_limit {
        return Err(PyValueError::new_err(format!(
            "limit must be <= {max_limit} for {class}, got {limit}"
        )));
    }
    Ok((limit, to_positive_nanos("window", window)?))
}

/// A window limiter class (`FixedWindow`, `SlidingWindow`) over a lock-free shared core:
/// `$name(limit, window, clock=None)` with `limit <= $max`.
macro_rules! window_class {
    ($(#[$doc:meta])* $ty:ident, $core:ty, $name:literal, $max:expr) => {
        $(#[$doc])*
        #[pyclass(frozen, module = "weir", name = $name)]
        pub(crate) struct $ty {
            core: $core,
            clock: TimeSource,
        }

        shared_replay!($ty);

        limiter_methods!($ty, |s| s.core, getters {
            limit: u64 = s.core.config().limit(),
            window: f64 = to_secs(s.core.config().window()),
        }, window_new($max, $name, |limit, window, clock| {
            let core = <$core>::new(limit, window).map_err(errors::config)?;
            Ok($ty { core, clock })
        }), {
            fn __repr__(&self) -> String {
                let c = self.core.config();
                format!(
                    "{}(limit={}, window={:?}, remaining={}, clock={})",
                    $name,
                    c.limit(),
                    to_secs(c.window()),
                    remaining_now(self.core.peek(self.clock.now(), 0)),
                    self.clock.describe()
                )
            }
        });
    };
}

window_class!(
    /// `weir.FixedWindow(limit, window, clock=None)`: at most `limit` admissions in each
    /// aligned window `[i·window, (i+1)·window)` of the clock (so up to `2·limit` across a
    /// window boundary); `limit <= 2**32 - 1`.
    PyFixedWindow,
    SharedFixedWindow,
    "FixedWindow",
    MAX_FIXED_LIMIT
);

window_class!(
    /// `weir.SlidingWindow(limit, window, clock=None)`: the sliding-window counter — admits
    /// while `ceil(prev·(window − e)/window) + cur + cost <= limit`; `limit <= 2**24 - 1`.
    PySlidingWindow,
    SharedSlidingWindow,
    "SlidingWindow",
    MAX_SLIDING_LIMIT
);

// ---- SlidingLog ---------------------------------------------------------------------------

/// The largest `SlidingLog` limit: the one cap of every weir frontend, which is the
/// biggest compiled ring here (8 bytes per entry, 256 KiB).
pub(crate) const MAX_LOG_LIMIT: u64 = weir_core::MAX_SLIDING_LOG_LIMIT;
const _: () = assert!(MAX_LOG_LIMIT as usize == 32768);

/// The core log with the smallest compiled capacity `N` that holds the limit: 8, 64, 512,
/// 4096 or 32768 entries (so the ring is at most 8× the limit, and at most 256 KiB).
enum Log {
    L8(Box<SlidingLog<8>>),
    L64(Box<SlidingLog<64>>),
    L512(Box<SlidingLog<512>>),
    L4096(Box<SlidingLog<4096>>),
    L32768(Box<SlidingLog<32768>>),
}

/// Runs `$body` with `$l` bound to the `&mut SlidingLog<N>` inside `$log`.
macro_rules! with_log {
    ($log:expr, |$l:ident| $body:expr) => {
        match $log {
            Log::L8($l) => $body,
            Log::L64($l) => $body,
            Log::L512($l) => $body,
            Log::L4096($l) => $body,
            Log::L32768($l) => $body,
        }
    };
}

impl Log {
    fn new(limit: u64, window: Nanos) -> Result<Log, weir_core::ParamError> {
        Ok(match limit {
            0..=8 => Log::L8(Box::new(SlidingLog::new(limit, window)?)),
            9..=64 => Log::L64(Box::new(SlidingLog::new(limit, window)?)),
            65..=512 => Log::L512(Box::new(SlidingLog::new(limit, window)?)),
            513..=4096 => Log::L4096(Box::new(SlidingLog::new(limit, window)?)),
            _ => Log::L32768(Box::new(SlidingLog::new(limit, window)?)),
        })
    }
    fn ring(&self) -> usize {
        match self {
            Log::L8(_) => 8,
            Log::L64(_) => 64,
            Log::L512(_) => 512,
            Log::L4096(_) => 4096,
            Log::L32768(_) => 32768,
        }
    }
}

/// The `&self` face of the locked log, so the shared `limiter_methods!` apply.
struct LockedLog {
    log: Mutex<Log>,
    limit: u64,
    window: Nanos,
}

impl LockedLog {
    fn lock(&self) -> MutexGuard<'_, Log> {
        // Each critical section is one core call, which does not panic: a poisoned lock
        // still holds a consistent log.
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }
    #[inline]
    fn acquire(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        with_log!(&mut *self.lock(), |l| l.acquire(now, cost))
    }
    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        with_log!(&*self.lock(), |l| l.peek(now, cost))
    }
    fn capacity(&self) -> u64 {
        self.limit
    }
}

/// `weir.SlidingLog(limit, window, clock=None)`: the exact sliding log — at most `limit`
/// admissions in every interval of length `window`; `limit <= 32768` (8 bytes per entry).
#[pyclass(frozen, module = "weir", name = "SlidingLog")]
pub(crate) struct PySlidingLog {
    core: LockedLog,
    clock: TimeSource,
}

impl PyLimiter for PySlidingLog {
    fn time(&self) -> &TimeSource {
        &self.clock
    }
    fn capacity(&self) -> u64 {
        self.core.limit
    }
    #[inline]
    fn fill(&self, f: Fill<'_>) -> (u64, u64, Nanos) {
        // One lock per chunk; the core's batch step (no Decision, no reset_after).
        with_log!(&mut *self.core.lock(), |l| f.batch(&mut **l))
    }
}

limiter_methods!(
    PySlidingLog,
    |s| s.core,
    getters {
        limit: u64 = s.core.limit,
        window: f64 = to_secs(s.core.window),
    },
    window_new(MAX_LOG_LIMIT, "SlidingLog", |limit, window, clock| {
        // The one sliding-log limit check, then the smallest ring that holds it.
        Limit::sliding_log(limit, window).map_err(errors::config)?;
        let log = Log::new(limit, window).map_err(errors::config)?;
        Ok(PySlidingLog {
            core: LockedLog {
                log: Mutex::new(log),
                limit,
                window,
            },
            clock,
        })
    }),
    {
        /// Forgets every admission: the log becomes empty.
        fn reset(&self) {
            with_log!(&mut *self.core.lock(), |l| l.reset());
        }

        fn __repr__(&self) -> String {
            let ring = self.core.lock().ring();
            format!(
                "SlidingLog(limit={}, window={:?}, remaining={}, ring={}, clock={})",
                self.core.limit,
                to_secs(self.core.window),
                remaining_now(self.core.peek(self.clock.now(), 0)),
                ring,
                self.clock.describe()
            )
        }
    }
);
