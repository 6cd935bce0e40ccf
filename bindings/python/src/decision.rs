//! `weir.Decision`: the core's [`weir_core::Decision`] as an immutable Python object.

use crate::time::to_secs;
use pyo3::prelude::*;
use weir_core::{Decision, Nanos};

/// The answer of a limiter to one `try_acquire`. A freelist recycles the objects: one is
/// allocated per `try_acquire`, and reusing them saves ~1/3 of the call (BENCHMARKS.md).
#[pyclass(frozen, freelist = 256, module = "weir", name = "Decision")]
pub(crate) struct PyDecision {
    pub(crate) inner: Decision,
}

impl PyDecision {
    pub(crate) fn new(inner: Decision) -> Self {
        PyDecision { inner }
    }
}

#[pymethods]
impl PyDecision {
    /// True when admitted (possibly after `.delay`).
    #[getter]
    fn allowed(&self) -> bool {
        self.inner.is_allowed()
    }
    /// Whole further admissions of cost 1 possible right after this decision.
    #[getter]
    fn remaining(&self) -> u64 {
        self.inner.remaining
    }
    /// Seconds until this cost would be admitted; 0.0 when allowed.
    #[getter]
    fn retry_after(&self) -> f64 {
        to_secs(self.inner.retry_after)
    }
    /// `retry_after` in whole nanoseconds (exact).
    #[getter]
    fn retry_after_ns(&self) -> u64 {
        self.inner.retry_after.0
    }
    /// Seconds the caller must hold an admitted request (leaky bucket); 0.0 otherwise.
    #[getter]
    fn delay(&self) -> f64 {
        to_secs(self.inner.delay())
    }
    /// `delay` in whole nanoseconds (exact).
    #[getter]
    fn delay_ns(&self) -> u64 {
        self.inner.delay().0
    }
    /// Seconds until `remaining` next grows; 0.0 when the limiter is full.
    #[getter]
    fn reset_after(&self) -> f64 {
        to_secs(self.inner.reset_after)
    }
    fn __bool__(&self) -> bool {
        self.inner.is_allowed()
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyDecision>()
            .map(|o| o.get().inner == self.inner)
            .unwrap_or(false)
    }
    fn __hash__(&self) -> u64 {
        let d = &self.inner;
        (d.is_allowed() as u64)
            ^ d.remaining.rotate_left(7)
            ^ d.retry_after.0.rotate_left(23)
            ^ d.delay().0.rotate_left(41)
    }
    fn __repr__(&self) -> String {
        let d = &self.inner;
        let mut s = format!(
            "Decision(allowed={}, remaining={}, retry_after={:?}",
            if d.is_allowed() { "True" } else { "False" },
            d.remaining,
            to_secs(d.retry_after),
        );
        if d.delay() != Nanos::ZERO {
            s.push_str(&format!(", delay={:?}", to_secs(d.delay())));
        }
        s.push(')');
        s
    }
}
