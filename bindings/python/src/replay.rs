//! `weir.replay`: a whole arrival trace through a limiter on its manual clock.
//!
//! The Python wrapper (`weir.replay`) hands over `times` / `costs` as native-endian
//! `float64` / `uint64` columns: a `bytes`, or a 1-D `memoryview` of that format (a numpy
//! array, an `array`; numpy is optional). abi3-py39 has no buffer protocol to read a
//! `memoryview` in place, so [`Column`] copies it out [`CHUNK`] events at a time into a
//! short-lived `bytes` that stays in cache and is recycled by the allocator — one copy of
//! the whole trace would be fresh memory, page faults included (about 1/7 of a replay's
//! time here). Validation reads every chunk first (so a bad trace changes nothing); then,
//! with the GIL released per chunk for traces of 4096 events or more, each event runs
//! through the core's `acquire(times[i], costs[i])` — the very step `try_acquire` takes
//! (every limiter runs the core's `acquire_batch`: the same decisions without a `Decision`
//! per event, and for the lock-free ones one CAS per batch of events) — with no
//! intermediate vectors and no per-event Python object. The manual clock is left at the last event's time.
//!
//! The result: a small one is written straight into one new `bytes`. A large one is fresh
//! memory whose 4 KiB page faults cost more than the decisions, so it goes into a mapping
//! of our own advised for transparent huge pages ([`huge_output`]), which the loop writes
//! in place and a [`PyColumns`] hands to Python (viewed through `ctypes`: see there).
//! An `out` buffer given by the caller is written chunk by chunk through a cache-resident
//! scratch and slice assignment (abi3-py39 has no buffer protocol to write it in place).

use crate::errors;
use crate::fill::{BYTES_PER_EVENT, Fill, PyLimiter};
use crate::limiters::{PyFixedWindow, PyLeakyBucket, PySlidingLog, PySlidingWindow, PyTokenBucket};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PySlice};
use weir_core::Nanos;
// Used only by the benchmark hooks at the end of this file.
#[cfg(feature = "bench-hooks")]
use {
    crate::time::round_ns,
    weir_core::{Decision, SharedTokenBucket},
};

/// Traces at least this long run without the GIL.
const DETACH_AT: usize = 4096;

/// Results at least this large (bytes) go into huge pages where the OS offers them.
const HUGE_AT: usize = 4 << 20;

/// Events per chunk of a `memoryview` column: 256 KiB of input, cache-resident.
const CHUNK: usize = 1 << 15;

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

/// A column of 8-byte items: a `bytes` (read in place) or a 1-D `memoryview` with 8-byte
/// items, read [`CHUNK`] events at a time through `view[a:b].tobytes()`.
struct Column<'py> {
    obj: Bound<'py, PyAny>,
    bytes: Option<Bound<'py, PyBytes>>,
    len: usize,
}

impl<'py> Column<'py> {
    fn new(name: &str, obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        let (bytes, len) = match obj.cast::<PyBytes>() {
            Ok(b) => {
                let l = b.as_bytes().len();
                if !l.is_multiple_of(8) {
                    return Err(PyValueError::new_err(format!(
                        "{name} must be 8-byte items, got {l} bytes"
                    )));
                }
                (Some(b.clone()), l / 8)
            }
            Err(_) => (None, obj.len()?),
        };
        Ok(Column {
            obj: obj.clone(),
            bytes,
            len,
        })
    }

    /// `f` of the raw bytes of items `a..b`.
    fn with<R>(&self, a: usize, b: usize, f: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
        if let Some(bytes) = &self.bytes {
            return Ok(f(&bytes.as_bytes()[8 * a..8 * b]));
        }
        let py = self.obj.py();
        let part = self
            .obj
            .get_item(PySlice::new(py, a as isize, b as isize, 1))?
            .call_method0(intern!(py, "tobytes"))?;
        let part = part.cast_into::<PyBytes>()?;
        let raw = part.as_bytes();
        if raw.len() != 8 * (b - a) {
            return Err(PyValueError::new_err(
                "a replay column must be a 1-D buffer of 8-byte items",
            ));
        }
        Ok(f(raw))
    }
}

/// `(start, end)` of each chunk of `n` events.
fn chunks(n: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n).step_by(CHUNK).map(move |a| (a, (a + CHUNK).min(n)))
}

/// `>= 0` and not NaN.
#[inline(always)]
fn valid_time(s: f64) -> bool {
    s >= 0.0
}

/// The index within `b` of the first time that is NaN or negative.
fn bad_time(b: &[u8]) -> Option<usize> {
    let n = b.len() / 8;
    // Branch-free scan first (vectorises); locate the culprit only on failure.
    let mut bad = false;
    for i in 0..n {
        bad |= !valid_time(f64_at(b, i));
    }
    if !bad {
        return None;
    }
    (0..n).find(|&i| !valid_time(f64_at(b, i)))
}

/// The index within `b` of the first cost above `cap`.
fn bad_cost(b: &[u8], cap: u64) -> Option<usize> {
    let n = b.len() / 8;
    let mut max = 0u64;
    for i in 0..n {
        max = max.max(u64_at(b, i));
    }
    if max <= cap {
        return None;
    }
    (0..n).find(|&i| u64_at(b, i) > cap)
}

/// Every time, then every cost: the first problem as an exception (times first).
fn validate(
    py: Python<'_>,
    times: &Column<'_>,
    costs: Option<&Column<'_>>,
    cap: u64,
) -> PyResult<()> {
    let n = times.len;
    // A length mismatch is reported after the times, like the other cost errors.
    let mismatch = costs.map(|c| c.len).filter(|&l| l != n);
    let costs = costs.filter(|_| mismatch.is_none());
    let mut time_err: Option<(usize, f64)> = None;
    let mut cost_err: Option<(usize, u64)> = None;
    for (a, b) in chunks(n) {
        if time_err.is_none() {
            time_err = times.with(a, b, |t| bad_time(t).map(|i| (a + i, f64_at(t, i))))?;
        }
        if let Some(c) = costs
            && cost_err.is_none()
        {
            cost_err = c.with(a, b, |c| bad_cost(c, cap).map(|i| (a + i, u64_at(c, i))))?;
        }
        if time_err.is_some() {
            break;
        }
    }
    if let Some((i, t)) = time_err {
        return Err(PyValueError::new_err(format!(
            "times[{i}] must be >= 0 seconds and not NaN, got {t}"
        )));
    }
    if let Some(l) = mismatch {
        return Err(PyValueError::new_err(format!(
            "costs has {l} items but times has {n}"
        )));
    }
    if let Some((i, cost)) = cost_err {
        let e = errors::insufficient(
            py,
            weir_core::InsufficientCapacity {
                cost,
                capacity: cap,
            },
        );
        let _ = e.value(py).setattr("index", i);
        return Err(e);
    }
    Ok(())
}

/// Chunk `a..b` of the trace into the chunk's own slices of the three columns.
#[allow(clippy::too_many_arguments)]
fn run_chunk<'py, P: PyLimiter>(
    py: Python<'py>,
    lim: &P,
    times: &Column<'py>,
    costs: Option<&Column<'py>>,
    (a, b): (usize, usize),
    ns: &mut [u64],
    rem: &mut [u8],
    wait: &mut [u8],
    allowed: &mut [u8],
) -> PyResult<(u64, u64, Nanos)> {
    let detach = times.len >= DETACH_AT;
    times.with(a, b, |times| {
        let mut run = |costs: Option<&[u8]>| {
            let fill = Fill {
                times,
                costs,
                ns,
                rem,
                wait,
                allowed,
            };
            if detach {
                py.detach(|| lim.fill(fill))
            } else {
                lim.fill(fill)
            }
        };
        match costs {
            None => Ok(run(None)),
            Some(c) => c.with(a, b, |c| run(Some(c))),
        }
    })?
}

fn replay_on<'py, P: PyLimiter>(
    py: Python<'py>,
    lim: &P,
    times: &Column<'py>,
    costs: Option<&Column<'py>>,
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyAny>, u64, u64)> {
    let clock = lim.time().manual().ok_or_else(|| {
        PyValueError::new_err(
            "limiter must run on a weir.ManualClock to be replayed (pass clock=weir.ManualClock())",
        )
    })?;
    let n = times.len;
    let size = n * BYTES_PER_EVENT;
    if let Some(o) = out {
        let l = o.len()?;
        if l != size {
            return Err(PyValueError::new_err(format!(
                "out must have {size} bytes (17 per event), got {l}"
            )));
        }
    }
    validate(py, times, costs, lim.capacity())?;
    // The chunk's times in nanoseconds (see `Fill::batch`).
    let mut ns = vec![0u64; CHUNK.min(n)];
    let (mut admitted, mut delayed, mut last) = (0u64, 0u64, Nanos::ZERO);
    // Decides events `a..b` into the three column slices and adds up the tallies.
    let mut decide = |span: (usize, usize),
                      rem: &mut [u8],
                      wait: &mut [u8],
                      allowed: &mut [u8]|
     -> PyResult<()> {
        let (ad, de, la) = run_chunk(py, lim, times, costs, span, &mut ns, rem, wait, allowed)?;
        admitted += ad;
        delayed += de;
        last = la;
        Ok(())
    };
    // Every chunk decided straight into its place in `out` (all `17·n` bytes).
    let mut decide_into = |out: &mut [u8]| -> PyResult<()> {
        let (rem, rest) = out.split_at_mut(8 * n);
        let (wait, allowed) = rest.split_at_mut(8 * n);
        for (a, b) in chunks(n) {
            decide(
                (a, b),
                &mut rem[8 * a..8 * b],
                &mut wait[8 * a..8 * b],
                &mut allowed[a..b],
            )?;
        }
        Ok(())
    };
    let columns = match out {
        Some(o) => {
            // Without the buffer protocol (not in the abi3-py39 API) the caller's buffer
            // cannot be written in place: each chunk is decided into a cache-resident
            // scratch and copied in by slice assignment (three `memcpy`s per chunk).
            let mut scratch = vec![0u8; BYTES_PER_EVENT * CHUNK.min(n)];
            for (a, b) in chunks(n) {
                let k = b - a;
                let (rem, rest) = scratch.split_at_mut(8 * k);
                let (wait, rest) = rest.split_at_mut(8 * k);
                let allowed = &mut rest[..k];
                decide((a, b), rem, wait, allowed)?;
                for (at, part) in [
                    (8 * a, &scratch[..8 * k]),
                    (8 * n + 8 * a, &scratch[8 * k..16 * k]),
                    (16 * n + a, &scratch[16 * k..17 * k]),
                ] {
                    let slice = PySlice::new(py, at as isize, (at + part.len()) as isize, 1);
                    o.set_item(slice, PyBytes::new(py, part))?;
                }
            }
            o.clone()
        }
        None => match huge_output(size) {
            Some(mut map) => {
                decide_into(&mut map[..size])?;
                Bound::new(py, PyColumns::seal(map, size)?)?.into_any()
            }
            None => PyBytes::new_with(py, size, |out| decide_into(out))?.into_any(),
        },
    };
    if n > 0 {
        clock.set(last);
    }
    Ok((columns, admitted, delayed))
}

/// A writable anonymous private mapping for a result of `size` bytes, advised
/// `MADV_HUGEPAGE` on Linux, or `None` for a result below [`HUGE_AT`] or when the mapping
/// fails (the caller then writes a `bytes`).
///
/// Why: a long replay's result is fresh memory, and with 4 KiB pages its page faults cost
/// more than the decisions (~41 k faults per 10 M events). Transparent huge pages are
/// usually in `madvise` mode, and glibc does not advise its mappings, so a `bytes` never
/// gets them; a mapping of our own, advised, takes 2 MiB per fault. Private, because
/// shared anonymous memory is shmem, which THP usually leaves alone; its length is rounded
/// up to whole huge pages, so the kernel places it on a huge-page boundary and its last
/// page is a huge one too. A failed `madvise` (THP off) leaves ordinary pages: still
/// correct. The mapping is ours (`memmap2`: safe Rust), so the loop decides straight into
/// it — no scratch, no copies — and [`PyColumns`] hands it to Python.
fn huge_output(size: usize) -> Option<memmap2::MmapMut> {
    if size < HUGE_AT {
        return None;
    }
    let map = memmap2::MmapMut::map_anon(size.checked_next_multiple_of(HUGE_PAGE)?).ok()?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    Some(map)
}

/// The transparent huge page size of x86_64 and of arm64 with 4 KiB pages.
const HUGE_PAGE: usize = 2 << 20;

/// `weir._weir._Columns`: a large [`_replay`] result — the columns in a private anonymous
/// mapping ([`huge_output`]) that this object owns and unmaps when it is freed, read-only
/// from the moment the loop is done (`mprotect`).
///
/// abi3-py39 has no buffer protocol to export it with (it entered the limited API in
/// 3.11), so Python views it through `ctypes` (`weir._replay._view`): an array at
/// [`address`](PyColumns::address) that holds a reference to this object, so the
/// mapping outlives every `memoryview` and numpy array made from it. The mapping never
/// moves and nothing writes to it after [`PyColumns::seal`]: the address stays valid
/// and the bytes fixed for the object's whole life.
#[pyclass(frozen, module = "weir._weir", name = "_Columns")]
pub(crate) struct PyColumns {
    map: memmap2::Mmap,
    len: usize,
}

impl PyColumns {
    /// The filled mapping, made read-only; `len` bytes of it are the result.
    fn seal(map: memmap2::MmapMut, len: usize) -> PyResult<Self> {
        let map = map.make_read_only()?;
        Ok(PyColumns { map, len })
    }

    /// The result's bytes.
    fn bytes(&self) -> &[u8] {
        &self.map[..self.len]
    }
}

#[pymethods]
impl PyColumns {
    /// The result's size in bytes (`17·n`).
    fn __len__(&self) -> usize {
        self.len
    }

    /// The mapping's address (the first byte of the result).
    #[getter]
    fn address(&self) -> usize {
        self.map.as_ptr() as usize
    }

    /// The mapping's length: [`__len__`](PyColumns::__len__) rounded up to whole huge pages.
    #[getter]
    fn capacity(&self) -> usize {
        self.map.len()
    }

    /// A copy of the result as `bytes` (where `ctypes` is missing).
    fn tobytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.bytes())
    }
}

/// `_replay(limiter, times, costs_or_None, out=None)` → `(columns, admitted, delayed)`.
/// `times` and `costs` are native float64 / uint64 columns: `bytes`, or 1-D `memoryview`s
/// of 8-byte items. `columns` holds `17·n` bytes: `remaining` (u64) and `wait` (f64
/// seconds) columns of `8·n` bytes each, then `allowed` (`n` bytes of 0/1); `delayed`
/// counts admitted events with a non-zero delay. `columns` is `out` when given (any
/// writable buffer of `17·n` bytes, filled by slice assignment), else a [`PyColumns`]
/// for a large result (a huge-page mapping, [`huge_output`]), else a new `bytes`.
#[pyfunction]
#[pyo3(signature = (limiter, times, costs = None, out = None))]
pub(crate) fn _replay<'py>(
    py: Python<'py>,
    limiter: &Bound<'py, PyAny>,
    times: &Bound<'py, PyAny>,
    costs: Option<&Bound<'py, PyAny>>,
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyAny>, u64, u64)> {
    let out = out.filter(|o| !o.is_none());
    let times = Column::new("times", times)?;
    let costs = match costs {
        Some(c) if !c.is_none() => Some(Column::new("costs", c)?),
        _ => None,
    };
    let (t, c) = (&times, costs.as_ref());
    if let Ok(l) = limiter.cast::<PyTokenBucket>() {
        return replay_on(py, l.get(), t, c, out);
    }
    if let Ok(l) = limiter.cast::<PyLeakyBucket>() {
        return replay_on(py, l.get(), t, c, out);
    }
    if let Ok(l) = limiter.cast::<PyFixedWindow>() {
        return replay_on(py, l.get(), t, c, out);
    }
    if let Ok(l) = limiter.cast::<PySlidingWindow>() {
        return replay_on(py, l.get(), t, c, out);
    }
    if let Ok(l) = limiter.cast::<PySlidingLog>() {
        return replay_on(py, l.get(), t, c, out);
    }
    Err(PyTypeError::new_err(format!(
        "limiter must be a weir rate limiter (TokenBucket, LeakyBucket, FixedWindow, \
         SlidingWindow, SlidingLog), not {}",
        limiter.get_type().name()?
    )))
}

/// Bytes `a..b` of `obj`: in place for a `bytes` or a [`PyColumns`], else through
/// `obj[a:b]` (an `mmap` slice is a `bytes`).
fn with_range<R>(
    obj: &Bound<'_, PyAny>,
    (a, b): (usize, usize),
    f: impl FnOnce(&[u8]) -> R,
) -> PyResult<R> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(f(&bytes.as_bytes()[a..b]));
    }
    if let Ok(cols) = obj.cast::<PyColumns>() {
        return Ok(f(&cols.get().bytes()[a..b]));
    }
    let part = obj.get_item(PySlice::new(obj.py(), a as isize, b as isize, 1))?;
    let part = part.cast_into::<PyBytes>()?;
    if part.as_bytes().len() != b - a {
        return Err(PyValueError::new_err("columns: short read"));
    }
    Ok(f(part.as_bytes()))
}

/// `_split_wait(columns)` → `(retry_after, delay)` f64 bytes: the `wait` column of a
/// [`_replay`] result (a `bytes`, a [`PyColumns`] or an `out` buffer) split by `allowed` (only needed when some
/// admitted event was delayed).
#[pyfunction]
pub(crate) fn _split_wait<'py>(
    py: Python<'py>,
    columns: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let n = columns.len()? / BYTES_PER_EVENT;
    let split = |keep: u8| {
        PyBytes::new_with(py, 8 * n, |out| {
            for (a, b) in chunks(n) {
                let out = &mut out[8 * a..8 * b];
                with_range(columns, (8 * n + 8 * a, 8 * n + 8 * b), |wait| {
                    with_range(columns, (16 * n + a, 16 * n + b), |allowed| {
                        for ((o, w), &al) in out
                            .chunks_exact_mut(8)
                            .zip(wait.chunks_exact(8))
                            .zip(allowed)
                        {
                            if al == keep {
                                o.copy_from_slice(w);
                            }
                        }
                    })
                })??;
            }
            Ok(())
        })
    };
    Ok((split(0)?, split(1)?))
}

/// Benchmark baseline (not API): the bare core loop a Rust program would write — a fresh
/// `SharedTokenBucket(rate, per_ns, burst)`, `acquire(t, 1)` for each float64 time, count
/// the admissions; no validation, no columns. Returns the admitted count. Only with the
/// `bench-hooks` feature (`maturin develop --release --features bench-hooks`), for
/// `bench/python/bench_calls.py`: the shipped module does not carry it.
#[cfg(feature = "bench-hooks")]
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
/// to split `try_acquire`'s cost into call, result object and core work. Only with the
/// `bench-hooks` feature, like `_bench_core_loop`.
#[cfg(feature = "bench-hooks")]
#[pyclass(frozen, module = "weir._weir", name = "_Probe")]
pub(crate) struct PyProbe;

#[cfg(feature = "bench-hooks")]
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
