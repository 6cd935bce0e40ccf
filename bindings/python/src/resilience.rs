//! The resilience primitives: semaphore, deadline, retry budget, backoff, circuit breaker.
//!
//! Thin wrappers over the core's shared forms. The only state the glue adds is the
//! circuit breaker's book of outstanding tickets and its transition log (see
//! [`PyCircuitBreaker`]), kept under one `Mutex`.

use crate::errors;
use crate::time::{PyManualClock, TimeSource, to_nanos, to_positive_nanos, to_secs};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::collections::VecDeque;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, MutexGuard};
use weir_core::{
    Backoff, BackoffSequence, BreakerConfig, BreakerState, Cooldown, Deadline, Jitter, Nanos,
    OwnedPermit, RetryBudgetConfig, Semaphore, SharedBreaker, SharedRetryBudget, SlowCall,
    SplitMix64, Ticket, Transition,
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the data half-updated here (each
    // critical section is a single push/pop), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A seed from the caller, or a fresh random one.
fn seed_arg(seed: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    match seed {
        Some(s) if !s.is_none() => errors::count("seed", s),
        _ => {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0),
            );
            Ok(h.finish())
        }
    }
}

/// A fraction `x` in `lo..=hi` as parts per million (nearest).
fn ppm(name: &str, x: f64, lo_exclusive: bool, hi: f64) -> PyResult<u32> {
    let ok = if lo_exclusive { x > 0.0 } else { x >= 0.0 };
    if !ok || x.is_nan() || x > hi {
        let lo = if lo_exclusive { "0 < " } else { "0 <= " };
        return Err(PyValueError::new_err(format!(
            "{name} must be {lo}{name} <= {hi}, got {x}"
        )));
    }
    Ok((x * 1e6).round() as u32)
}

/// A growth factor ≥ 1 as thousandths (nearest).
fn milli(name: &str, x: f64) -> PyResult<u32> {
    if x.is_nan() || !(1.0..=1000.0).contains(&x) {
        return Err(PyValueError::new_err(format!(
            "{name} must be between 1.0 and 1000.0, got {x}"
        )));
    }
    Ok((x * 1000.0).round() as u32)
}

fn small(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u32> {
    let n = errors::positive_count(name, v)?;
    u32::try_from(n).map_err(|_| PyValueError::new_err(format!("{name} is too large, got {n}")))
}

// ---- Semaphore --------------------------------------------------------------------------

/// `weir.Semaphore(max)`: at most `max` permits held at once; never blocks.
#[pyclass(frozen, module = "weir", name = "Semaphore")]
pub(crate) struct PySemaphore {
    inner: Arc<Semaphore>,
}

/// A held permit: release it with `release()`, by leaving a `with` block, or by dropping it.
#[pyclass(frozen, module = "weir", name = "Permit")]
pub(crate) struct PyPermit {
    inner: Mutex<Option<OwnedPermit<Arc<Semaphore>>>>,
    count: u64,
}

#[pymethods]
impl PySemaphore {
    #[new]
    fn new(max: &Bound<'_, PyAny>) -> PyResult<Self> {
        let max = errors::positive_count("max", max)?;
        Ok(PySemaphore {
            inner: Arc::new(Semaphore::new(NonZeroU64::new(max).expect("checked > 0"))),
        })
    }
    /// Takes `n` permits if free now: a `Permit` (a context manager), or `None`.
    #[pyo3(signature = (n = None), text_signature = "($self, n=1)")]
    fn try_acquire(&self, n: Option<&Bound<'_, PyAny>>) -> PyResult<Option<PyPermit>> {
        let n = match n {
            None => 1,
            Some(v) => errors::count("n", v)?,
        };
        Ok(
            Semaphore::try_acquire_owned(Arc::clone(&self.inner), n).map(|p| PyPermit {
                inner: Mutex::new(Some(p)),
                count: n,
            }),
        )
    }
    #[getter]
    fn max(&self) -> u64 {
        self.inner.max()
    }
    /// Permits held now (a snapshot).
    #[getter]
    fn in_use(&self) -> u64 {
        self.inner.in_use()
    }
    /// Permits free now (a snapshot).
    #[getter]
    fn available(&self) -> u64 {
        self.inner.available()
    }
    fn __repr__(&self) -> String {
        format!(
            "Semaphore(max={}, in_use={})",
            self.inner.max(),
            self.inner.in_use()
        )
    }
}

#[pymethods]
impl PyPermit {
    /// Gives the permits back; a second call does nothing.
    fn release(&self) {
        drop(lock(&self.inner).take());
    }
    /// The number of permits this holds (0 once released).
    #[getter]
    fn count(&self) -> u64 {
        if lock(&self.inner).is_some() {
            self.count
        } else {
            0
        }
    }
    #[getter]
    fn released(&self) -> bool {
        lock(&self.inner).is_none()
    }
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.release();
        false
    }
    fn __repr__(&self) -> String {
        match lock(&self.inner).as_ref() {
            Some(_) => format!("Permit(count={})", self.count),
            None => "Permit(released)".into(),
        }
    }
}

// ---- Deadline ---------------------------------------------------------------------------

/// `weir.Deadline(total, clock=None)`: a total time budget starting now.
#[pyclass(frozen, module = "weir", name = "Deadline")]
pub(crate) struct PyDeadline {
    inner: Deadline,
    clock: TimeSource,
}

#[pymethods]
impl PyDeadline {
    #[new]
    #[pyo3(signature = (total, clock = None))]
    fn new(total: f64, clock: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let total = to_nanos("total", total)?;
        let clock = TimeSource::from_arg(clock)?;
        Ok(PyDeadline {
            inner: Deadline::new(clock.now(), total),
            clock,
        })
    }
    /// Seconds left (never negative; a rewound clock counts as no time passed).
    fn remaining(&self) -> f64 {
        to_secs(self.inner.remaining(self.clock.now()))
    }
    /// Seconds since the start.
    fn elapsed(&self) -> f64 {
        to_secs(self.inner.elapsed(self.clock.now()))
    }
    /// The timeout for an attempt starting now: `min(cap, remaining())`.
    fn per_try(&self, cap: f64) -> PyResult<f64> {
        let cap = to_nanos("cap", cap)?;
        Ok(to_secs(self.inner.per_try(self.clock.now(), cap)))
    }
    /// True once nothing remains.
    fn expired(&self) -> bool {
        self.inner.expired(self.clock.now())
    }
    /// True iff after waiting `backoff` at least `min_useful` (and more than 0) would remain.
    #[pyo3(signature = (backoff = 0.0, min_useful = 0.0))]
    fn can_start_attempt(&self, backoff: f64, min_useful: f64) -> PyResult<bool> {
        let b = to_nanos("backoff", backoff)?;
        let m = to_nanos("min_useful", min_useful)?;
        Ok(self.inner.can_start_attempt(self.clock.now(), b, m))
    }
    #[getter]
    fn total(&self) -> f64 {
        to_secs(self.inner.total())
    }
    #[getter]
    fn clock(&self, py: Python<'_>) -> Option<Py<PyManualClock>> {
        self.clock.py_object(py)
    }
    fn __repr__(&self) -> String {
        format!(
            "Deadline(total={:?}, remaining={:?}, clock={})",
            to_secs(self.inner.total()),
            self.remaining(),
            self.clock.describe()
        )
    }
}

// ---- RetryBudget ------------------------------------------------------------------------

/// `weir.RetryBudget(ratio, min_per_sec, ttl, clock=None)`: retries may be at most `ratio`
/// of the requests deposited over the last `ttl` seconds, plus a reserve of `min_per_sec`
/// retries per second.
#[pyclass(frozen, module = "weir", name = "RetryBudget")]
pub(crate) struct PyRetryBudget {
    inner: SharedRetryBudget,
    clock: TimeSource,
    ratio: f64,
}

#[pymethods]
impl PyRetryBudget {
    #[new]
    #[pyo3(signature = (ratio, min_per_sec, ttl, clock = None))]
    fn new(
        ratio: f64,
        min_per_sec: &Bound<'_, PyAny>,
        ttl: f64,
        clock: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let ratio_ppm = ppm("ratio", ratio, false, 1000.0)?;
        let mps = errors::count("min_per_sec", min_per_sec)?;
        let mps = u32::try_from(mps)
            .map_err(|_| PyValueError::new_err(format!("min_per_sec is too large, got {mps}")))?;
        let ttl_ns = to_nanos("ttl", ttl)?;
        if ttl_ns < Nanos::from_secs(1) {
            return Err(PyValueError::new_err(format!(
                "ttl must be >= 1 second, got {ttl}"
            )));
        }
        let cfg = RetryBudgetConfig::new(ratio_ppm, mps, ttl_ns).map_err(errors::config)?;
        Ok(PyRetryBudget {
            inner: SharedRetryBudget::new(cfg),
            clock: TimeSource::from_arg(clock)?,
            ratio,
        })
    }
    /// Records one request (each earns `ratio` of a retry).
    fn deposit(&self) {
        self.inner.deposit(self.clock.now());
    }
    /// Takes one retry if the budget allows it.
    fn try_withdraw(&self) -> bool {
        self.inner.try_withdraw(self.clock.now())
    }
    /// Whole retries grantable now (a snapshot).
    fn available(&self) -> u64 {
        self.inner.available(self.clock.now())
    }
    #[getter]
    fn ratio(&self) -> f64 {
        self.ratio
    }
    #[getter]
    fn min_per_sec(&self) -> u32 {
        self.inner.config().min_per_sec()
    }
    #[getter]
    fn ttl(&self) -> f64 {
        to_secs(self.inner.config().ttl())
    }
    #[getter]
    fn clock(&self, py: Python<'_>) -> Option<Py<PyManualClock>> {
        self.clock.py_object(py)
    }
    fn __repr__(&self) -> String {
        format!(
            "RetryBudget(ratio={:?}, min_per_sec={}, ttl={:?}, available={}, clock={})",
            self.ratio,
            self.min_per_sec(),
            self.ttl(),
            self.available(),
            self.clock.describe()
        )
    }
}

// ---- Backoff ----------------------------------------------------------------------------

/// `weir.Backoff(base, max, jitter="full", seed=None, multiplier=2.0)`.
///
/// Delays come from the core's [`BackoffSequence`], the one the engine's retries use:
/// calling `delay(1)`, `delay(2)`, ... in order gives exactly the engine's sequence
/// (decorrelated jitter draws from the previous delay *returned*, from the second retry
/// on). `delay(1)` starts a new sequence; an attempt out of order gets the core's
/// stateless `Backoff::delay` (decorrelated: the previous *scheduled* delay).
#[pyclass(frozen, module = "weir", name = "Backoff")]
pub(crate) struct PyBackoff {
    inner: Backoff,
    seq: Mutex<(SplitMix64, BackoffSequence)>,
    seed: u64,
}

#[pymethods]
impl PyBackoff {
    #[new]
    #[pyo3(
        signature = (base, max, jitter = None, seed = None, multiplier = 2.0),
        text_signature = "(base, max, jitter='full', seed=None, multiplier=2.0)"
    )]
    fn new(
        base: f64,
        max: f64,
        jitter: Option<&Bound<'_, PyAny>>,
        seed: Option<&Bound<'_, PyAny>>,
        multiplier: f64,
    ) -> PyResult<Self> {
        let base = to_positive_nanos("base", base)?;
        let max = to_positive_nanos("max", max)?;
        let j: String = match jitter {
            None => "full".to_owned(),
            Some(j) => j.extract().map_err(|_| {
                PyTypeError::new_err(
                    "jitter must be a str: 'none', 'full', 'equal' or 'decorrelated'",
                )
            })?,
        };
        let jitter = Jitter::parse(&j).ok_or_else(|| {
            PyValueError::new_err(format!(
                "jitter must be 'none', 'full', 'equal' or 'decorrelated', got {j:?}"
            ))
        })?;
        let m = milli("multiplier", multiplier)?;
        let inner = Backoff::new(base, max, m, jitter).map_err(errors::config)?;
        let seed = seed_arg(seed)?;
        Ok(PyBackoff {
            inner,
            seq: Mutex::new((SplitMix64::new(seed), inner.sequence())),
            seed,
        })
    }
    /// Seconds to wait before attempt `attempt` (1 = the first retry; 0 → 0.0), jittered.
    fn delay(&self, attempt: &Bound<'_, PyAny>) -> PyResult<f64> {
        let a = errors::count("attempt", attempt)?;
        let a = u32::try_from(a).unwrap_or(u32::MAX);
        let (rng, seq) = &mut *lock(&self.seq);
        if a == 1 {
            *seq = self.inner.sequence();
        }
        let d = if a != 0 && seq.attempt() == a - 1 {
            seq.next_delay(rng)
        } else {
            self.inner.delay(a, rng)
        };
        Ok(to_secs(d))
    }
    /// The un-jittered delay of attempt `attempt`.
    fn schedule(&self, attempt: &Bound<'_, PyAny>) -> PyResult<f64> {
        let a = errors::count("attempt", attempt)?;
        Ok(to_secs(
            self.inner.schedule(u32::try_from(a).unwrap_or(u32::MAX)),
        ))
    }
    #[getter]
    fn base(&self) -> f64 {
        to_secs(self.inner.base())
    }
    #[getter]
    fn max(&self) -> f64 {
        to_secs(self.inner.max())
    }
    #[getter]
    fn jitter(&self) -> &'static str {
        self.inner.jitter().as_str()
    }
    #[getter]
    fn multiplier(&self) -> f64 {
        f64::from(self.inner.multiplier_milli()) / 1000.0
    }
    #[getter]
    fn seed(&self) -> u64 {
        self.seed
    }
    fn __repr__(&self) -> String {
        format!(
            "Backoff(base={:?}, max={:?}, jitter='{}', multiplier={:?}, seed={})",
            self.base(),
            self.max(),
            self.jitter(),
            self.multiplier(),
            self.seed
        )
    }
}

// ---- CircuitBreaker ---------------------------------------------------------------------

struct Book {
    /// Admitted calls whose outcome is not recorded yet, oldest first.
    tickets: VecDeque<Ticket>,
    transitions: Vec<Transition>,
}

/// `weir.CircuitBreaker(...)`: CLOSED → OPEN → HALF_OPEN → CLOSED over the core's
/// `SharedBreaker`.
///
/// The core hands out a ticket per admitted call and wants it back with the outcome. The
/// Python API of the contract has no ticket argument, so each admitted `allow()` keeps its
/// ticket here and `record_success()` / `record_failure()` give back the oldest one (FIFO).
/// An outcome recorded with no outstanding ticket first asks `allow()` for one — it counts
/// only if the breaker would have admitted that call.
#[pyclass(frozen, module = "weir", name = "CircuitBreaker")]
pub(crate) struct PyCircuitBreaker {
    inner: SharedBreaker,
    clock: TimeSource,
    book: Mutex<Book>,
    seed: u64,
}

impl PyCircuitBreaker {
    fn log(book: &mut Book, t: Option<Transition>) {
        if let Some(t) = t {
            book.transitions.push(t);
        }
    }
    fn record(&self, failed: bool, duration: f64) -> PyResult<()> {
        let duration = to_nanos("duration", duration)?;
        let now = self.clock.now();
        let mut book = lock(&self.book);
        let ticket = match book.tickets.pop_front() {
            Some(t) => t,
            None => match self.inner.allow(now) {
                Ok(a) => {
                    Self::log(&mut book, a.transition);
                    a.ticket
                }
                Err(r) => {
                    Self::log(&mut book, r.transition);
                    return Ok(());
                }
            },
        };
        let t = self.inner.record(ticket, now, duration, failed);
        Self::log(&mut book, t);
        Ok(())
    }
}

fn state_str(s: BreakerState) -> &'static str {
    s.as_str()
}

#[pymethods]
impl PyCircuitBreaker {
    #[new]
    #[pyo3(signature = (
        consecutive_failures = None, failure_rate = None, window = None, min_calls = None,
        cooldown_base = 5.0, cooldown_max = 60.0, multiplier = 2.0, jitter = 0.2,
        probes = None, successes = None, ramp = 0.0, clock = None, seed = None,
        slow_call = None, slow_call_rate = None, probe_timeout = 60.0,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        consecutive_failures: Option<&Bound<'_, PyAny>>,
        failure_rate: Option<f64>,
        window: Option<&Bound<'_, PyAny>>,
        min_calls: Option<&Bound<'_, PyAny>>,
        cooldown_base: f64,
        cooldown_max: f64,
        multiplier: f64,
        jitter: f64,
        probes: Option<&Bound<'_, PyAny>>,
        successes: Option<&Bound<'_, PyAny>>,
        ramp: f64,
        clock: Option<&Bound<'_, PyAny>>,
        seed: Option<&Bound<'_, PyAny>>,
        slow_call: Option<f64>,
        slow_call_rate: Option<f64>,
        probe_timeout: f64,
    ) -> PyResult<Self> {
        let mut cfg = BreakerConfig::default();
        fn given<'a, 'py>(o: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
            o.filter(|v| !v.is_none())
        }
        cfg.consecutive_failures = match given(consecutive_failures) {
            Some(v) => Some(small("consecutive_failures", v)?),
            // With no trip rule given at all, the core's default (5 in a row) applies.
            None if failure_rate.is_none() && slow_call.is_none() => cfg.consecutive_failures,
            None => None,
        };
        cfg.failure_rate_ppm = failure_rate
            .map(|r| ppm("failure_rate", r, true, 1.0))
            .transpose()?;
        cfg.slow_call = match (slow_call, slow_call_rate) {
            (None, None) => None,
            (Some(t), r) => Some(SlowCall {
                threshold: to_nanos("slow_call", t)?,
                rate_ppm: ppm("slow_call_rate", r.unwrap_or(1.0), true, 1.0)?,
            }),
            (None, Some(_)) => {
                return Err(PyValueError::new_err(
                    "slow_call_rate needs slow_call (the duration above which a call is slow)",
                ));
            }
        };
        if let Some(w) = given(window) {
            cfg.window = small("window", w)?;
        }
        if let Some(m) = given(min_calls) {
            cfg.min_calls = small("min_calls", m)?;
        } else if cfg.min_calls > cfg.window {
            cfg.min_calls = cfg.window;
        }
        cfg.cooldown = Cooldown {
            base: to_positive_nanos("cooldown_base", cooldown_base)?,
            max: to_positive_nanos("cooldown_max", cooldown_max)?,
            multiplier_milli: milli("multiplier", multiplier)?,
            jitter_ppm: ppm("jitter", jitter, false, 1.0)?,
        };
        if let Some(p) = given(probes) {
            cfg.probes = small("probes", p)?;
        }
        if let Some(s) = given(successes) {
            cfg.successes = small("successes", s)?;
        }
        cfg.ramp = to_nanos("ramp", ramp)?;
        cfg.probe_timeout = to_positive_nanos("probe_timeout", probe_timeout)?;
        let seed = seed_arg(seed)?;
        let inner = SharedBreaker::new(cfg, seed).map_err(errors::config)?;
        Ok(PyCircuitBreaker {
            inner,
            clock: TimeSource::from_arg(clock)?,
            book: Mutex::new(Book {
                tickets: VecDeque::new(),
                transitions: Vec::new(),
            }),
            seed,
        })
    }

    /// May a call go ahead now? When True, report its outcome with `record_success()` or
    /// `record_failure()` (or `cancel()` if it was never made).
    fn allow(&self) -> bool {
        let now = self.clock.now();
        let mut book = lock(&self.book);
        match self.inner.allow(now) {
            Ok(a) => {
                Self::log(&mut book, a.transition);
                book.tickets.push_back(a.ticket);
                true
            }
            Err(r) => {
                Self::log(&mut book, r.transition);
                false
            }
        }
    }

    /// Records that the oldest outstanding admitted call succeeded (taking `duration`
    /// seconds, for the slow-call rule).
    #[pyo3(signature = (duration = 0.0))]
    fn record_success(&self, duration: f64) -> PyResult<()> {
        self.record(false, duration)
    }

    /// Records that the oldest outstanding admitted call failed.
    #[pyo3(signature = (duration = 0.0))]
    fn record_failure(&self, duration: f64) -> PyResult<()> {
        self.record(true, duration)
    }

    /// Gives back the oldest outstanding admitted call without an outcome (it was never
    /// made). Returns False when none is outstanding.
    fn cancel(&self) -> bool {
        let mut book = lock(&self.book);
        match book.tickets.pop_front() {
            Some(t) => {
                self.inner.cancel(t);
                true
            }
            None => false,
        }
    }

    /// `"closed"`, `"open"` or `"half_open"`: the state the next `allow()` acts in (OPEN
    /// past its cooldown reads `half_open`).
    #[getter]
    fn state(&self) -> &'static str {
        state_str(self.inner.state(self.clock.now()))
    }

    /// Every state change so far: `(time, from, to)` with `time` in seconds on this
    /// breaker's clock.
    fn transitions(&self) -> Vec<(f64, &'static str, &'static str)> {
        lock(&self.book)
            .transitions
            .iter()
            .map(|t| (to_secs(t.at), state_str(t.from), state_str(t.to)))
            .collect()
    }

    /// Admitted calls whose outcome is not recorded yet.
    #[getter]
    fn outstanding(&self) -> usize {
        lock(&self.book).tickets.len()
    }
    /// Consecutive failed recoveries (the cooldown exponent).
    #[getter]
    fn failed_recoveries(&self) -> u32 {
        self.inner.failed_recoveries()
    }
    #[getter]
    fn probes_in_flight(&self) -> u32 {
        self.inner.probes_in_flight()
    }
    #[getter]
    fn seed(&self) -> u64 {
        self.seed
    }
    #[getter]
    fn clock(&self, py: Python<'_>) -> Option<Py<PyManualClock>> {
        self.clock.py_object(py)
    }
    fn __repr__(&self) -> String {
        let c = self.inner.config();
        let mut rules = Vec::new();
        if let Some(n) = c.consecutive_failures {
            rules.push(format!("consecutive_failures={n}"));
        }
        if let Some(r) = c.failure_rate_ppm {
            rules.push(format!(
                "failure_rate={:?}, window={}, min_calls={}",
                f64::from(r) / 1e6,
                c.window,
                c.min_calls
            ));
        }
        format!(
            "CircuitBreaker(state='{}', {}, cooldown_base={:?}, cooldown_max={:?}, probes={}, successes={}, ramp={:?}, clock={})",
            self.state(),
            rules.join(", "),
            to_secs(c.cooldown.base),
            to_secs(c.cooldown.max),
            c.probes,
            c.successes,
            to_secs(c.ramp),
            self.clock.describe()
        )
    }
}
