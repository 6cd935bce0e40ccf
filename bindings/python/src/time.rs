//! Time at the boundary: float seconds in Python, integer [`Nanos`] in the core.
//!
//! Conversion rounds `seconds × 1e9` (computed in double precision) to the nearest
//! nanosecond, halves away from zero. NaN and negative values are `ValueError`s naming the
//! argument; values beyond `u64::MAX` ns (about 584.5 years), `+inf` included, saturate to
//! [`Nanos::MAX`], which the core treats as "forever".
//!
//! A limiter reads either a shared [`ManualClock`] (an `Arc` of the core's clock, so several
//! Python objects can share one and `replay` can drive it without the GIL) or a monotonic
//! real clock (the TSC through [`QuantaClock`], the OS clock without an invariant TSC),
//! counted from one process-wide epoch so that instants of different objects compare.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::sync::{Arc, OnceLock};
use weir_core::{Clock, ManualClock, Nanos, QuantaClock};

/// Seconds → nanoseconds, rounding to nearest; NaN / negative → `ValueError` naming `name`.
pub(crate) fn to_nanos(name: &str, seconds: f64) -> PyResult<Nanos> {
    if seconds.is_nan() {
        return Err(PyValueError::new_err(format!(
            "{name} must be a number of seconds, got NaN"
        )));
    }
    if seconds < 0.0 {
        return Err(PyValueError::new_err(format!(
            "{name} must be >= 0 seconds, got {seconds}"
        )));
    }
    Ok(round_ns(seconds * 1e9))
}

/// `2^52`: from there on, doubles are whole numbers.
pub(crate) const TWO52: f64 = 4_503_599_627_370_496.0;

/// A non-negative, non-NaN nanosecond count → the nearest whole nanosecond, halves away
/// from zero, saturating. The same as `x.round() as u64` without a libm call (x86-64
/// baseline has no `roundsd`) and, below 2^52 ns (52 days), without any float ↔ integer
/// conversion instruction, which matters in `replay`'s loop.
#[inline]
pub(crate) fn round_ns(x: f64) -> Nanos {
    if x < TWO52 {
        return Nanos(round_small(x));
    }
    // `as` saturates: +inf and anything past u64::MAX become u64::MAX.
    let i = x as u64;
    // Here x ≥ 2^52 is a whole number and the difference is <= 0.
    Nanos(i.saturating_add((x - i as f64 >= 0.5) as u64))
}

/// [`round_ns`] for `0 ≤ x < 2^52`: no branch, so a loop of it vectorises.
#[inline(always)]
pub(crate) fn round_small(x: f64) -> u64 {
    // `x + 2^52` lies in [2^52, 2^53), where the spacing of doubles is exactly 1: the add
    // rounds x to the nearest integer (ties to even) and the mantissa bits are that
    // integer. `x − r` is exact (|x − r| ≤ 0.5, both below 2^52): a tie rounded down to
    // even is 0.5 exactly, and is rounded up instead (halves away from zero).
    let y = x + TWO52;
    let r = y - TWO52;
    (y.to_bits() - TWO52.to_bits()) + u64::from(x - r == 0.5)
}

/// Like [`to_nanos`], and zero (after rounding) is a `ValueError` too.
pub(crate) fn to_positive_nanos(name: &str, seconds: f64) -> PyResult<Nanos> {
    let n = to_nanos(name, seconds)?;
    if n.is_zero() {
        return Err(PyValueError::new_err(format!(
            "{name} must be > 0 seconds (at least 1 ns after rounding), got {seconds}"
        )));
    }
    Ok(n)
}

/// Nanoseconds → float seconds (the nearest double).
pub(crate) fn to_secs(n: Nanos) -> f64 {
    n.as_secs_f64()
}

/// The process-wide real clock: the CPU's invariant TSC through `quanta` (the OS monotonic
/// clock where there is none), counted from the first use. A TSC read costs a fraction of
/// `Instant::now()` (a vDSO `clock_gettime`), which is a large share of a `try_acquire`.
/// The first call calibrates the TSC against the OS clock (quanta: tens of ms, at most
/// ~200 ms, once per process).
fn process_epoch() -> &'static QuantaClock {
    static EPOCH: OnceLock<QuantaClock> = OnceLock::new();
    EPOCH.get_or_init(QuantaClock::new)
}

/// `weir.ManualClock(start=0.0)`: a clock that moves only when told to. Share one between
/// several limiters to run them on the same simulated time.
#[pyclass(frozen, module = "weir", name = "ManualClock")]
pub(crate) struct PyManualClock {
    pub(crate) inner: Arc<ManualClock>,
}

#[pymethods]
impl PyManualClock {
    #[new]
    #[pyo3(signature = (start = 0.0))]
    fn new(start: f64) -> PyResult<Self> {
        Ok(PyManualClock {
            inner: Arc::new(ManualClock::new(to_nanos("start", start)?)),
        })
    }

    /// Current time in seconds.
    fn now(&self) -> f64 {
        to_secs(self.inner.now())
    }

    /// Current time in whole nanoseconds (exact).
    fn now_ns(&self) -> u64 {
        self.inner.now().0
    }

    /// Moves the clock forward by `seconds` (saturating).
    fn advance(&self, seconds: f64) -> PyResult<()> {
        self.inner.advance(to_nanos("seconds", seconds)?);
        Ok(())
    }

    /// Sets the clock to `seconds`; earlier than now is allowed (a rewind: primitives treat
    /// it as "no time passed", never as extra capacity).
    fn set(&self, seconds: f64) -> PyResult<()> {
        self.inner.set(to_nanos("seconds", seconds)?);
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("ManualClock(now={:?})", to_secs(self.inner.now()))
    }
}

/// Where a Python-facing object reads time.
pub(crate) enum TimeSource {
    /// A `weir.ManualClock`; the Python object is kept to hand it back from `.clock`.
    Manual(Arc<ManualClock>, Py<PyManualClock>),
    /// The real (monotonic) clock from the process epoch.
    Monotonic(&'static QuantaClock),
}

impl TimeSource {
    /// From the `clock=` argument: `None` (monotonic) or a `weir.ManualClock`.
    pub(crate) fn from_arg(clock: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        match clock {
            None => Ok(TimeSource::Monotonic(process_epoch())),
            Some(c) if c.is_none() => Ok(TimeSource::Monotonic(process_epoch())),
            Some(c) => match c.cast::<PyManualClock>() {
                Ok(m) => Ok(TimeSource::Manual(
                    m.get().inner.clone(),
                    m.clone().unbind(),
                )),
                Err(_) => Err(PyTypeError::new_err(format!(
                    "clock must be a weir.ManualClock or None, not {}",
                    c.get_type().name()?
                ))),
            },
        }
    }

    #[inline]
    pub(crate) fn now(&self) -> Nanos {
        match self {
            TimeSource::Manual(c, _) => c.now(),
            TimeSource::Monotonic(c) => c.now(),
        }
    }

    /// The manual clock, if any (for `replay`).
    pub(crate) fn manual(&self) -> Option<&Arc<ManualClock>> {
        match self {
            TimeSource::Manual(c, _) => Some(c),
            TimeSource::Monotonic(_) => None,
        }
    }

    /// What `.clock` returns: the `ManualClock` object or `None`.
    pub(crate) fn py_object(&self, py: Python<'_>) -> Option<Py<PyManualClock>> {
        match self {
            TimeSource::Manual(_, o) => Some(o.clone_ref(py)),
            TimeSource::Monotonic(_) => None,
        }
    }

    /// For reprs: `ManualClock(now=…)` or `monotonic`.
    pub(crate) fn describe(&self) -> String {
        match self {
            TimeSource::Manual(c, _) => format!("ManualClock(now={:?})", to_secs(c.now())),
            TimeSource::Monotonic(_) => "monotonic".into(),
        }
    }
}
