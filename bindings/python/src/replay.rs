//! `weir.replay`: a whole arrival trace through a limiter on its manual clock.
//!
//! The Python wrapper (`weir.replay`) turns `times`/`costs` into native-endian `float64` /
//! `uint64` bytes (zero-copy-ish from any buffer; numpy is optional), and wraps the four
//! result byte strings in typed `memoryview`s. Here: validate every input first (so a bad
//! trace changes nothing), then, with the GIL released for traces of 4096 events or more,
//! for each event set the manual clock to its time and call the core's shared-form
//! `acquire` — the very step `try_acquire` takes.

use crate::errors;
use crate::limiters::{PyLimiter, PyTokenBucket};
use crate::time::{round_ns, to_secs};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use weir_core::{ManualClock, Nanos, SharedRateLimiter};

/// Traces at least this long run without the GIL.
const DETACH_AT: usize = 4096;

/// The bulk outcome, columns in event order.
struct Columns {
    allowed: Vec<u8>,
    remaining: Vec<u64>,
    retry_after: Vec<f64>,
    delay: Vec<f64>,
    admitted: u64,
}

fn run<L: SharedRateLimiter>(
    core: &L,
    clock: &ManualClock,
    times: &[Nanos],
    costs: Option<&[u64]>,
) -> Columns {
    let n = times.len();
    let mut c = Columns {
        allowed: vec![0; n],
        remaining: vec![0; n],
        retry_after: vec![0.0; n],
        delay: vec![0.0; n],
        admitted: 0,
    };
    let mut admitted = 0u64;
    for i in 0..n {
        let t = times[i];
        let cost = match costs {
            Some(cs) => cs[i],
            None => 1,
        };
        clock.set(t);
        // Costs were checked against the capacity before the run.
        let d = match core.acquire(t, cost) {
            Ok(d) => d,
            Err(_) => unreachable_decision(),
        };
        let ok = d.is_allowed();
        admitted += ok as u64;
        c.allowed[i] = ok as u8;
        c.remaining[i] = d.remaining;
        // Zero for most events: skip the divisions (the columns start zeroed).
        if !d.retry_after.is_zero() {
            c.retry_after[i] = to_secs(d.retry_after);
        }
        let delay = d.delay();
        if !delay.is_zero() {
            c.delay[i] = to_secs(delay);
        }
    }
    c.admitted = admitted;
    c
}

#[cold]
fn unreachable_decision() -> weir_core::Decision {
    // Only reachable if the core's capacity() disagreed with its own check: report a
    // rejection rather than panic in a detached thread.
    weir_core::Decision {
        verdict: weir_core::Verdict::Reject,
        remaining: 0,
        retry_after: Nanos::MAX,
        reset_after: Nanos::MAX,
    }
}

fn parse_times(b: &[u8]) -> PyResult<Vec<Nanos>> {
    let mut out = Vec::with_capacity(b.len() / 8);
    for ch in b.chunks_exact(8) {
        let s = f64::from_ne_bytes(ch.try_into().expect("8 bytes"));
        // NaN fails both comparisons; checked after the loop to keep it branch-light.
        out.push(round_ns(if s >= 0.0 { s * 1e9 } else { -1.0 }));
    }
    if let Some(i) = b.chunks_exact(8).position(|ch| {
        let s = f64::from_ne_bytes(ch.try_into().expect("8 bytes"));
        !(s >= 0.0)
    }) {
        let s = f64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        return Err(PyValueError::new_err(format!(
            "times[{i}] must be >= 0 seconds and not NaN, got {s}"
        )));
    }
    Ok(out)
}

fn parse_costs(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|ch| u64::from_ne_bytes(ch.try_into().expect("8 bytes")))
        .collect()
}

fn replay_on<'py, P: PyLimiter>(
    py: Python<'py>,
    lim: &P,
    times: &[u8],
    costs: Option<&[u8]>,
) -> PyResult<Bound<'py, PyAny>> {
    let clock = lim.time().manual().ok_or_else(|| {
        PyValueError::new_err(
            "limiter must run on a weir.ManualClock to be replayed (pass clock=weir.ManualClock())",
        )
    })?;
    let times = parse_times(times)?;
    let costs = costs.map(parse_costs);
    if let Some(cs) = &costs {
        if cs.len() != times.len() {
            return Err(PyValueError::new_err(format!(
                "costs has {} items but times has {}",
                cs.len(),
                times.len()
            )));
        }
        let cap = lim.core().capacity();
        if let Some((i, &c)) = cs.iter().enumerate().find(|&(_, &c)| c > cap) {
            let e = errors::insufficient(
                py,
                weir_core::InsufficientCapacity {
                    cost: c,
                    capacity: cap,
                },
            );
            let _ = e.value(py).setattr("index", i);
            return Err(e);
        }
    }
    let core = lim.core();
    let cols = if times.len() >= DETACH_AT {
        py.detach(|| run(core, clock, &times, costs.as_deref()))
    } else {
        run(core, clock, &times, costs.as_deref())
    };
    let t = (
        PyBytes::new(py, &cols.allowed),
        PyBytes::new(py, bytemuck::cast_slice(&cols.remaining)),
        PyBytes::new(py, bytemuck::cast_slice(&cols.retry_after)),
        PyBytes::new(py, bytemuck::cast_slice(&cols.delay)),
        cols.admitted,
    );
    Ok(t.into_pyobject(py)?.into_any())
}

/// `_replay(limiter, times_f64_bytes, costs_u64_bytes_or_None)` →
/// `(allowed u8 bytes, remaining u64 bytes, retry_after f64 bytes, delay f64 bytes, admitted)`.
#[pyfunction]
#[pyo3(signature = (limiter, times, costs = None))]
pub(crate) fn _replay<'py>(
    py: Python<'py>,
    limiter: &Bound<'py, PyAny>,
    times: &Bound<'py, PyBytes>,
    costs: Option<&Bound<'py, PyBytes>>,
) -> PyResult<Bound<'py, PyAny>> {
    let times = times.as_bytes();
    let costs = costs.map(|c| c.as_bytes());
    if let Ok(l) = limiter.cast::<PyTokenBucket>() {
        return replay_on(py, l.get(), times, costs);
    }
    Err(PyTypeError::new_err(format!(
        "limiter must be a weir rate limiter (TokenBucket, LeakyBucket, FixedWindow, \
         SlidingWindow, SlidingLog), not {}",
        limiter.get_type().name()?
    )))
}
