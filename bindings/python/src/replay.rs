//! `weir.replay`: a whole arrival trace through a limiter on its manual clock.
//!
//! The Python wrapper (`weir.replay`) turns `times`/`costs` into native-endian `float64` /
//! `uint64` bytes (a single copy from any float64 buffer; numpy is optional) and slices the
//! one result `bytes` into typed `memoryview` columns. Here: validate every input first (so
//! a bad trace changes nothing), then, with the GIL released for traces of 4096 events or
//! more, run each event through the core's `acquire(times[i], costs[i])` — the very step
//! `try_acquire` takes — writing each decision straight into the result buffer: no
//! intermediate vectors, no per-event Python object. The manual clock is left at the last
//! event's time.

use crate::errors;
use crate::limiters::{PyFixedWindow, PyLeakyBucket, PySlidingLog, PySlidingWindow, PyTokenBucket};
use crate::time::{TimeSource, round_ns};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use weir_core::{Decision, Nanos, SharedTokenBucket};

/// Traces at least this long run without the GIL.
const DETACH_AT: usize = 4096;

/// Bytes of result per event: `remaining` u64, `wait` f64, `allowed` u8. `wait` is
/// `retry_after` for a rejected event and `delay` for an admitted one (at most one of the
/// two is non-zero), so both columns fit in one; [`_split_wait`] separates them on demand.
pub(crate) const BYTES_PER_EVENT: usize = 17;

/// Something that consumes a step function `(now, cost) -> Decision` over a limiter's core
/// (static dispatch: the step inlines into the loop).
pub(crate) trait Sink {
    type Out;
    fn run<S: FnMut(Nanos, u64) -> Decision>(self, step: S) -> Self::Out;
}

/// Implemented by every limiter class, so `replay` can drive any of them.
pub(crate) trait PyLimiter: Sync {
    fn time(&self) -> &TimeSource;
    /// The largest admissible cost.
    fn capacity(&self) -> u64;
    /// Hands `k` the core's acquire step (taking a lock once, for a single-owner core).
    fn drive<K: Sink>(&self, k: K) -> K::Out;
}

#[inline(always)]
fn f64_at(b: &[u8], i: usize) -> f64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[i * 8..i * 8 + 8]);
    f64::from_ne_bytes(a)
}

#[inline(always)]
fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[i * 8..i * 8 + 8]);
    u64::from_ne_bytes(a)
}

/// The replay loop: decisions written into the column layout of [`BYTES_PER_EVENT`].
struct Fill<'a> {
    /// `n` native f64 seconds, all `>= 0` (validated).
    times: &'a [u8],
    /// `n` native u64 costs, all within the capacity (validated), or all 1.
    costs: Option<&'a [u8]>,
    /// `17·n` zeroed bytes: `remaining[n] | wait[n] | allowed[n]`.
    out: &'a mut [u8],
}

impl Sink for Fill<'_> {
    /// `(admitted, delayed, last time)`.
    type Out = (u64, u64, Nanos);
    #[inline]
    fn run<S: FnMut(Nanos, u64) -> Decision>(self, mut step: S) -> (u64, u64, Nanos) {
        match self.costs {
            None => fill(self.times, self.out, |_| 1, &mut step),
            Some(c) => fill(self.times, self.out, |i| u64_at(c, i), &mut step),
        }
    }
}

#[inline(always)]
fn fill<C: Fn(usize) -> u64, S: FnMut(Nanos, u64) -> Decision>(
    times: &[u8],
    out: &mut [u8],
    cost: C,
    step: &mut S,
) -> (u64, u64, Nanos) {
    let n = times.len() / 8;
    let (rem, rest) = out.split_at_mut(8 * n);
    let (wait, al) = rest.split_at_mut(8 * n);
    let al = &mut al[..n];
    let (mut admitted, mut delayed) = (0u64, 0u64);
    let mut last = Nanos::ZERO;
    for (i, ((t, rem), wait)) in times
        .chunks_exact(8)
        .zip(rem.chunks_exact_mut(8))
        .zip(wait.chunks_exact_mut(8))
        .enumerate()
    {
        let mut a = [0u8; 8];
        a.copy_from_slice(t);
        let now = round_ns(f64::from_ne_bytes(a) * 1e9);
        last = now;
        let d = step(now, cost(i));
        let ok = d.is_allowed();
        admitted += ok as u64;
        if let Some(x) = al.get_mut(i) {
            *x = ok as u8;
        }
        rem.copy_from_slice(&d.remaining.to_ne_bytes());
        // Zero for most events: the buffer starts zeroed, skip the conversion.
        let w = if ok { d.delay() } else { d.retry_after };
        if !w.is_zero() {
            delayed += ok as u64;
            wait.copy_from_slice(&w.as_secs_f64().to_ne_bytes());
        }
    }
    (admitted, delayed, last)
}

/// `>= 0` and not NaN.
#[inline(always)]
fn valid_time(s: f64) -> bool {
    s >= 0.0
}

/// The first time that is NaN or negative, as a `ValueError`.
fn check_times(b: &[u8]) -> PyResult<()> {
    let n = b.len() / 8;
    // Branch-free scan first (vectorises); locate the culprit only on failure.
    let mut bad = false;
    for i in 0..n {
        bad |= !valid_time(f64_at(b, i));
    }
    if !bad {
        return Ok(());
    }
    let i = (0..n).find(|&i| !valid_time(f64_at(b, i))).unwrap_or(0);
    Err(PyValueError::new_err(format!(
        "times[{i}] must be >= 0 seconds and not NaN, got {}",
        f64_at(b, i)
    )))
}

fn check_costs(py: Python<'_>, b: &[u8], n: usize, cap: u64) -> PyResult<()> {
    if b.len() / 8 != n {
        return Err(PyValueError::new_err(format!(
            "costs has {} items but times has {n}",
            b.len() / 8
        )));
    }
    let mut max = 0u64;
    for i in 0..n {
        max = max.max(u64_at(b, i));
    }
    if max <= cap {
        return Ok(());
    }
    let i = (0..n).find(|&i| u64_at(b, i) > cap).unwrap_or(0);
    let e = errors::insufficient(
        py,
        weir_core::InsufficientCapacity {
            cost: u64_at(b, i),
            capacity: cap,
        },
    );
    let _ = e.value(py).setattr("index", i);
    Err(e)
}

fn replay_on<'py, P: PyLimiter>(
    py: Python<'py>,
    lim: &P,
    times: &[u8],
    costs: Option<&[u8]>,
) -> PyResult<(Bound<'py, PyBytes>, u64, u64)> {
    let clock = lim.time().manual().ok_or_else(|| {
        PyValueError::new_err(
            "limiter must run on a weir.ManualClock to be replayed (pass clock=weir.ManualClock())",
        )
    })?;
    if !times.len().is_multiple_of(8) {
        return Err(PyValueError::new_err("times must be float64 bytes"));
    }
    let n = times.len() / 8;
    check_times(times)?;
    if let Some(c) = costs {
        check_costs(py, c, n, lim.capacity())?;
    }
    let mut res = (0u64, 0u64, Nanos::ZERO);
    let buf = PyBytes::new_with(py, n * BYTES_PER_EVENT, |out| {
        let fill = Fill { times, costs, out };
        res = if n >= DETACH_AT {
            py.detach(|| lim.drive(fill))
        } else {
            lim.drive(fill)
        };
        Ok(())
    })?;
    if n > 0 {
        clock.set(res.2);
    }
    Ok((buf, res.0, res.1))
}

/// `_replay(limiter, times_f64_bytes, costs_u64_bytes_or_None)` →
/// `(columns, admitted, delayed)`: `columns` is one `bytes` of `17·n`: `remaining` (u64) and
/// `wait` (f64 seconds) columns of `8·n` bytes each, then `allowed` (`n` bytes of 0/1);
/// `delayed` counts admitted events with a non-zero delay.
#[pyfunction]
#[pyo3(signature = (limiter, times, costs = None))]
pub(crate) fn _replay<'py>(
    py: Python<'py>,
    limiter: &Bound<'py, PyAny>,
    times: &Bound<'py, PyBytes>,
    costs: Option<&Bound<'py, PyBytes>>,
) -> PyResult<(Bound<'py, PyBytes>, u64, u64)> {
    let times = times.as_bytes();
    let costs = costs.map(|c| c.as_bytes());
    if let Ok(l) = limiter.cast::<PyTokenBucket>() {
        return replay_on(py, l.get(), times, costs);
    }
    if let Ok(l) = limiter.cast::<PyLeakyBucket>() {
        return replay_on(py, l.get(), times, costs);
    }
    if let Ok(l) = limiter.cast::<PyFixedWindow>() {
        return replay_on(py, l.get(), times, costs);
    }
    if let Ok(l) = limiter.cast::<PySlidingWindow>() {
        return replay_on(py, l.get(), times, costs);
    }
    if let Ok(l) = limiter.cast::<PySlidingLog>() {
        return replay_on(py, l.get(), times, costs);
    }
    Err(PyTypeError::new_err(format!(
        "limiter must be a weir rate limiter (TokenBucket, LeakyBucket, FixedWindow, \
         SlidingWindow, SlidingLog), not {}",
        limiter.get_type().name()?
    )))
}

/// `_split_wait(columns)` → `(retry_after, delay)` f64 bytes: the `wait` column of a
/// [`_replay`] result split by `allowed` (only needed when some admitted event was delayed).
#[pyfunction]
pub(crate) fn _split_wait<'py>(
    py: Python<'py>,
    columns: &Bound<'py, PyBytes>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let b = columns.as_bytes();
    let n = b.len() / BYTES_PER_EVENT;
    let wait = &b[8 * n..16 * n];
    let allowed = &b[16 * n..17 * n];
    let column = |keep: u8| {
        PyBytes::new_with(py, 8 * n, |out| {
            for ((o, w), &a) in out
                .chunks_exact_mut(8)
                .zip(wait.chunks_exact(8))
                .zip(allowed)
            {
                if a == keep {
                    o.copy_from_slice(w);
                }
            }
            Ok(())
        })
    };
    Ok((column(0)?, column(1)?))
}

/// Benchmark baseline (not API): the bare core loop a Rust program would write — a fresh
/// `SharedTokenBucket(rate, per_ns, burst)`, `acquire(t, 1)` for each float64 time, count
/// the admissions; no validation, no columns. Returns the admitted count.
#[pyfunction]
pub(crate) fn _bench_core_loop(
    py: Python<'_>,
    times: &Bound<'_, PyBytes>,
    rate: u64,
    per_ns: u64,
    burst: u64,
) -> PyResult<u64> {
    let tb = SharedTokenBucket::new(rate, Nanos(per_ns), burst).map_err(errors::config)?;
    let times = times.as_bytes();
    Ok(py.detach(|| {
        let mut admitted = 0u64;
        for t in times.chunks_exact(8) {
            let mut a = [0u8; 8];
            a.copy_from_slice(t);
            let now = round_ns(f64::from_ne_bytes(a) * 1e9);
            if let Ok(d) = tb.acquire(now, 1) {
                admitted += d.is_allowed() as u64;
            }
        }
        admitted
    }))
}

/// Benchmark probe (not API): an empty method and a method returning a fixed `Decision`,
/// to split `try_acquire`'s cost into call, result object and core work.
#[pyclass(frozen, module = "weir._weir", name = "_Probe")]
pub(crate) struct PyProbe;

#[pymethods]
impl PyProbe {
    #[new]
    fn new() -> Self {
        PyProbe
    }
    /// Does nothing.
    fn noop(&self) {}
    /// Does nothing, with `try_acquire`'s optional argument (tuple/dict calling convention).
    #[pyo3(signature = (cost = None))]
    fn noop_arg(&self, cost: Option<&Bound<'_, PyAny>>) {
        let _ = cost;
    }
    /// Returns a new `Decision` (allowed, remaining 1).
    fn decision(&self) -> crate::decision::PyDecision {
        crate::decision::PyDecision::new(Decision {
            verdict: weir_core::Verdict::Admit,
            remaining: 1,
            retry_after: Nanos::ZERO,
            reset_after: Nanos::ZERO,
        })
    }
}
