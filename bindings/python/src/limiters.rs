//! The rate limiters: each class wraps the core's lock-free shared form and a clock.
//!
//! The glue does three things only: read the clock, convert `cost`, wrap the core's
//! [`weir_core::Decision`]. A new limiter starts full at its clock's current time.

use crate::decision::PyDecision;
use crate::errors;
use crate::time::{PyManualClock, TimeSource, to_positive_nanos, to_secs};
use pyo3::prelude::*;
use weir_core::{SharedRateLimiter, SharedTokenBucket};

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

/// One acquisition on `core` at the clock's now.
#[inline]
pub(crate) fn acquire<L: SharedRateLimiter>(
    py: Python<'_>,
    core: &L,
    clock: &TimeSource,
    cost: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyDecision> {
    let cost = cost_arg(cost)?;
    core.acquire(clock.now(), cost)
        .map(PyDecision::new)
        .map_err(|e| errors::insufficient(py, e))
}

/// `peek`: the decision without consuming.
pub(crate) fn peek<L: SharedRateLimiter>(
    py: Python<'_>,
    core: &L,
    clock: &TimeSource,
    cost: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyDecision> {
    let cost = cost_arg(cost)?;
    core.peek(clock.now(), cost)
        .map(PyDecision::new)
        .map_err(|e| errors::insufficient(py, e))
}

/// Implemented by every limiter class, so `replay` can drive any of them.
pub(crate) trait PyLimiter {
    /// The core limiter.
    type Core: SharedRateLimiter + Sync;
    fn core(&self) -> &Self::Core;
    fn time(&self) -> &TimeSource;
}

/// `weir.TokenBucket(rate, per, burst, clock=None)`: `rate` admissions per `per` seconds,
/// at most `burst` at once (GCRA, exact integer arithmetic).
#[pyclass(frozen, module = "weir", name = "TokenBucket")]
pub(crate) struct PyTokenBucket {
    core: SharedTokenBucket,
    clock: TimeSource,
}

impl PyLimiter for PyTokenBucket {
    type Core = SharedTokenBucket;
    fn core(&self) -> &SharedTokenBucket {
        &self.core
    }
    fn time(&self) -> &TimeSource {
        &self.clock
    }
}

#[pymethods]
impl PyTokenBucket {
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
        let core = SharedTokenBucket::new(rate, per, burst).map_err(errors::config)?;
        core.reset(clock.now());
        Ok(PyTokenBucket { core, clock })
    }

    /// Takes `cost` tokens if they are available now; returns a `Decision`.
    #[pyo3(signature = (cost = None))]
    fn try_acquire(&self, py: Python<'_>, cost: Option<&Bound<'_, PyAny>>) -> PyResult<PyDecision> {
        acquire(py, &self.core, &self.clock, cost)
    }

    /// The decision `try_acquire(cost)` would return now, consuming nothing.
    #[pyo3(signature = (cost = None))]
    fn peek(&self, py: Python<'_>, cost: Option<&Bound<'_, PyAny>>) -> PyResult<PyDecision> {
        peek(py, &self.core, &self.clock, cost)
    }

    /// Gives back up to `n` tokens (e.g. for a request that was never sent), never beyond full.
    #[pyo3(signature = (n = None))]
    fn refund(&self, n: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let n = cost_arg(n)?;
        self.core.refund(self.clock.now(), n);
        Ok(())
    }

    /// Makes the bucket full now.
    fn reset(&self) {
        self.core.reset(self.clock.now());
    }

    #[getter]
    fn rate(&self) -> u64 {
        self.core.config().rate()
    }
    #[getter]
    fn per(&self) -> f64 {
        to_secs(self.core.config().per())
    }
    #[getter]
    fn burst(&self) -> u64 {
        self.core.config().burst()
    }
    /// The largest cost ever admissible (the burst).
    #[getter]
    fn capacity(&self) -> u64 {
        self.core.capacity()
    }
    /// The `ManualClock` this bucket reads, or `None` for the monotonic clock.
    #[getter]
    fn clock(&self, py: Python<'_>) -> Option<Py<PyManualClock>> {
        self.clock.py_object(py)
    }

    fn __repr__(&self) -> PyResult<String> {
        let c = self.core.config();
        let d = self
            .core
            .peek(self.clock.now(), 0)
            .map_err(|_| errors::value_error("cost", "0 rejected"))?;
        Ok(format!(
            "TokenBucket(rate={}, per={:?}, burst={}, remaining={}, clock={})",
            c.rate(),
            to_secs(c.per()),
            c.burst(),
            d.remaining,
            self.clock.describe()
        ))
    }
}
