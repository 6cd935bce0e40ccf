//! `weir.Decision`: the core's [`weir_core::Decision`] as an immutable Python object.

use crate::time::to_secs;
use pyo3::prelude::*;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
use weir_core::{Decision, Nanos, Verdict};

/// The answer of a limiter to one `try_acquire`.
///
/// Immutable as far as Python can tell. To save the allocation of a new object per call
/// (~60 ns, about 40 % of a `try_acquire`:
/// docs/perf-log/2026-11-29-python-perf.md), [`issue`] reuses the object it
/// handed out last on this thread when nothing else refers to it any more (its reference
/// count is 1: only the reuse slot holds it), the same check CPython's own `zip` and
/// `dict.items()` iterators make before reusing their result tuple. An object that Python
/// code still holds (a variable, a list, a dict key) is never changed; the class has no
/// weak references, so no one can observe a reuse. Fields are atomics so that the class
/// stays `frozen` (no borrow flag on the getters); all accesses happen under the GIL.
#[pyclass(frozen, freelist = 256, module = "weir", name = "Decision")]
pub(crate) struct PyDecision {
    /// 0 admit, 1 delay, 2 reject.
    verdict: AtomicU8,
    delay: AtomicU64,
    remaining: AtomicU64,
    retry_after: AtomicU64,
    reset_after: AtomicU64,
}

impl PyDecision {
    pub(crate) fn new(d: Decision) -> Self {
        let p = PyDecision {
            verdict: AtomicU8::new(0),
            delay: AtomicU64::new(0),
            remaining: AtomicU64::new(0),
            retry_after: AtomicU64::new(0),
            reset_after: AtomicU64::new(0),
        };
        p.set(d);
        p
    }

    fn set(&self, d: Decision) {
        let (v, delay) = match d.verdict {
            Verdict::Admit => (0, 0),
            Verdict::Delay(n) => (1, n.0),
            Verdict::Reject => (2, 0),
        };
        self.verdict.store(v, Relaxed);
        self.delay.store(delay, Relaxed);
        self.remaining.store(d.remaining, Relaxed);
        self.retry_after.store(d.retry_after.0, Relaxed);
        self.reset_after.store(d.reset_after.0, Relaxed);
    }

    /// The core decision this object holds.
    pub(crate) fn get(&self) -> Decision {
        Decision {
            verdict: match self.verdict.load(Relaxed) {
                0 => Verdict::Admit,
                1 => Verdict::Delay(Nanos(self.delay.load(Relaxed))),
                _ => Verdict::Reject,
            },
            remaining: self.remaining.load(Relaxed),
            retry_after: Nanos(self.retry_after.load(Relaxed)),
            reset_after: Nanos(self.reset_after.load(Relaxed)),
        }
    }
}

thread_local! {
    /// The `Decision` [`issue`] handed out last on this thread.
    static LAST: RefCell<Option<Py<PyDecision>>> = const { RefCell::new(None) };
}

/// A `weir.Decision` for `d`: the object handed out last on this thread when nothing else
/// refers to it (see [`PyDecision`]), a new one otherwise.
pub(crate) fn issue(py: Python<'_>, d: Decision) -> PyResult<Py<PyDecision>> {
    LAST.with(|slot| {
        // No Python code should run while the slot is borrowed (a `Decision` is not a GC
        // type, has no `__del__` and no weak references); should a re-entrant call happen
        // anyway, it gets a new object instead of a panic.
        let Ok(mut slot) = slot.try_borrow_mut() else {
            return Py::new(py, PyDecision::new(d));
        };
        // `get_refcnt` is deprecated in favour of the `unsafe` `ffi::Py_REFCNT`, which this
        // crate does not use; it reads the same count. (abi3 builds always have the GIL:
        // the count is exact while we hold it.)
        #[allow(deprecated)]
        let sole = |last: &Py<PyDecision>| last.get_refcnt(py) == 1;
        if let Some(last) = slot.as_ref()
            && sole(last)
        {
            last.get().set(d);
            return Ok(last.clone_ref(py));
        }
        let new = Py::new(py, PyDecision::new(d))?;
        *slot = Some(new.clone_ref(py));
        Ok(new)
    })
}

#[pymethods]
impl PyDecision {
    /// True when admitted (possibly after `.delay`).
    #[getter]
    fn allowed(&self) -> bool {
        self.get().is_allowed()
    }
    /// Whole further admissions of cost 1 possible right after this decision.
    #[getter]
    fn remaining(&self) -> u64 {
        self.get().remaining
    }
    /// Seconds until this cost would be admitted; 0.0 when allowed.
    #[getter]
    fn retry_after(&self) -> f64 {
        to_secs(self.get().retry_after)
    }
    /// `retry_after` in whole nanoseconds (exact).
    #[getter]
    fn retry_after_ns(&self) -> u64 {
        self.get().retry_after.0
    }
    /// Seconds the caller must hold an admitted request (leaky bucket); 0.0 otherwise.
    #[getter]
    fn delay(&self) -> f64 {
        to_secs(self.get().delay())
    }
    /// `delay` in whole nanoseconds (exact).
    #[getter]
    fn delay_ns(&self) -> u64 {
        self.get().delay().0
    }
    /// Seconds until `remaining` next grows; 0.0 when the limiter is full.
    #[getter]
    fn reset_after(&self) -> f64 {
        to_secs(self.get().reset_after)
    }
    fn __bool__(&self) -> bool {
        self.get().is_allowed()
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyDecision>()
            .map(|o| o.get().get() == self.get())
            .unwrap_or(false)
    }
    fn __hash__(&self) -> u64 {
        let d = &self.get();
        (d.is_allowed() as u64)
            ^ d.remaining.rotate_left(7)
            ^ d.retry_after.0.rotate_left(23)
            ^ d.delay().0.rotate_left(41)
    }
    fn __repr__(&self) -> String {
        let d = &self.get();
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
