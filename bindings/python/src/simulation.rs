//! `weir.Simulation`'s native half: the virtual-time simulator ([`weir_sim`]), the very
//! engine of the gateways, over Python columns.
//!
//! Glue only: the Python wrapper (`weir/_simulation.py`) normalises arguments (a config
//! path or text, one headers dict or one per request); this side keeps the trace as
//! columns (arrivals, each distinct path / method / header set once with an index per
//! request: a million requests to one path share one text), which the simulator reads
//! through its [`Trace`] seam, runs the whole trace without the GIL, writes each record
//! into result columns at its index, and hands back the numeric columns as native-endian
//! bytes (zero-copy into numpy through `memoryview`) and the route / outcome names as
//! lists of shared `str` objects.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use weir_core::Nanos;
use weir_sim::{Outcome, RouteName, SimRecord, Simulation, Trace, TraceItem, UpstreamModel};

/// A config compiled for simulation, with its upstreams' models.
#[pyclass(frozen, module = "weir._weir", name = "_Simulation")]
pub(crate) struct PySimulation {
    sim: Mutex<Simulation>,
}

fn secs(name: &str, s: f64) -> PyResult<Duration> {
    if s.is_finite() && s >= 0.0 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(PyValueError::new_err(format!(
            "{name} must be seconds >= 0, got {s}"
        )))
    }
}

fn nanos(name: &str, s: f64) -> PyResult<Nanos> {
    secs(name, s).map(Nanos::from)
}

impl PySimulation {
    fn lock(&self) -> std::sync::MutexGuard<'_, Simulation> {
        self.sim.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PySimulation {
    /// `text`: the TOML; `origin`: its name in errors (a path anchors relative files).
    #[new]
    fn new(text: &str, origin: &str, seed: u64) -> PyResult<Self> {
        let sim = Simulation::new(text, origin, seed)
            .map_err(|e| PyValueError::new_err(format!("config: {e}")))?;
        Ok(PySimulation {
            sim: Mutex::new(sim),
        })
    }

    /// Sets upstream `name`'s model: latencies (seconds, used in order, cycling), error
    /// probability, outage windows `(start, end)` in seconds.
    fn upstream(
        &self,
        name: &str,
        latency: Vec<f64>,
        errors: f64,
        outages: Vec<(f64, f64)>,
    ) -> PyResult<()> {
        let latency = latency
            .into_iter()
            .map(|l| secs("latency", l))
            .collect::<PyResult<Vec<_>>>()?;
        let mut windows = Vec::with_capacity(outages.len());
        for (a, b) in outages {
            let (a, b) = (nanos("outages", a)?, nanos("outages", b)?);
            if b <= a {
                return Err(PyValueError::new_err(
                    "outages: each window must end after it starts",
                ));
            }
            windows.push((a, b));
        }
        let model = UpstreamModel {
            latency,
            errors,
            outages: windows,
        };
        self.lock()
            .set_upstream(name, model)
            .map_err(PyValueError::new_err)
    }

    /// Runs the trace; returns `(status u16, attempts u32, duration f64, queue f64, route
    /// list, reason list)`, the numeric columns as native bytes.
    ///
    /// `times`: a list of numbers; `paths`: one `str` for every request or a list;
    /// `methods`: `None` (GET) or a list; `headers`: `[]`, one dict for every request, or
    /// one per request.
    #[allow(clippy::type_complexity)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        times: &Bound<'py, PyList>,
        paths: &Bound<'py, PyAny>,
        methods: Option<&Bound<'py, PyAny>>,
        headers: &Bound<'py, PyList>,
    ) -> PyResult<(
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyList>,
        Bound<'py, PyList>,
    )> {
        let n = times.len();
        let mut t = Vec::with_capacity(n);
        for (i, v) in times.iter().enumerate() {
            t.push(arrival(i, &v)?);
        }
        let paths = Texts::new("paths", paths, n)?;
        let methods = match methods {
            Some(m) => Texts::new("methods", m, n)?,
            None => Texts::default(),
        };
        let heads = headers.len();
        if heads != n && heads > 1 {
            return Err(PyValueError::new_err(format!(
                "headers has {heads} items but times has {n}"
            )));
        }
        let mut header_sets = Vec::new();
        let mut header_of = Vec::new();
        // Consecutive requests given the same dict object share one converted copy.
        let mut last: Option<*mut pyo3::ffi::PyObject> = None;
        for d in headers.iter() {
            if last != Some(d.as_ptr()) {
                last = Some(d.as_ptr());
                header_sets.push(dict_headers(d.cast::<PyDict>()?)?);
            }
            if heads > 1 {
                header_of.push((header_sets.len() - 1) as u32);
            }
        }
        let trace = Columns {
            t,
            paths,
            methods,
            header_sets,
            header_of,
        };
        let mut cols = Out::new(n);
        let sim = self.lock();
        py.detach(|| sim.run_each(&trace, |i, r| cols.put(i, &r)))
            .map_err(|e| PyValueError::new_err(format!("config: {e}")))?;
        drop(sim);
        let route_names: Vec<Bound<'py, PyString>> =
            cols.routes.iter().map(|r| PyString::new(py, r)).collect();
        let reason_names: Vec<Bound<'py, PyString>> = Outcome::ALL
            .iter()
            .map(|o| PyString::new(py, o.as_str()))
            .collect();
        let route = PyList::new(py, cols.route.iter().map(|&j| &route_names[j as usize]))?;
        let reason = PyList::new(py, cols.reason.iter().map(|&j| &reason_names[j as usize]))?;
        Ok((
            bytes_of(py, &cols.status, u16::to_ne_bytes)?,
            bytes_of(py, &cols.attempts, u32::to_ne_bytes)?,
            bytes_of(py, &cols.duration, f64::to_ne_bytes)?,
            bytes_of(py, &cols.queue, f64::to_ne_bytes)?,
            route,
            reason,
        ))
    }
}

/// Item `i` of `times` as an arrival (the error names it only when there is one).
fn arrival(i: usize, v: &Bound<'_, PyAny>) -> PyResult<Nanos> {
    match v.extract::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(Nanos::from(Duration::from_secs_f64(s))),
        Ok(s) => Err(PyValueError::new_err(format!(
            "times[{i}] must be seconds >= 0, got {s}"
        ))),
        Err(_) => Err(PyValueError::new_err(format!(
            "times[{i}] must be a number of seconds, got {}",
            v.get_type().name()?
        ))),
    }
}

fn dict_headers(d: &Bound<'_, PyDict>) -> PyResult<Vec<(String, String)>> {
    d.iter()
        .map(|(k, v)| {
            let k: String = k.extract()?;
            let v: String = v.extract()?;
            Ok((k.to_ascii_lowercase(), v))
        })
        .collect()
}

/// A text column: each distinct text once, and per request the index of its text (no
/// indices: every request has `table[0]`, or `""` when the table is empty).
#[derive(Default)]
struct Texts {
    table: Vec<String>,
    of: Vec<u32>,
}

impl Texts {
    /// `one` str for every request, or a sequence of `n` (items that are not `str` are
    /// taken as `str(item)`).
    fn new(name: &str, v: &Bound<'_, PyAny>, n: usize) -> PyResult<Texts> {
        if let Ok(s) = v.cast::<PyString>() {
            return Ok(Texts {
                table: vec![s.to_cow()?.into_owned()],
                of: Vec::new(),
            });
        }
        let len = v.len()?;
        if len != n {
            return Err(PyValueError::new_err(format!(
                "{name} has {len} items but times has {n}"
            )));
        }
        let mut t = Texts {
            table: Vec::new(),
            of: Vec::with_capacity(n),
        };
        let mut index: HashMap<String, u32> = HashMap::new();
        // The same object as the item before (`["/a"] * n`) needs no lookup.
        let mut last: Option<(*mut pyo3::ffi::PyObject, u32)> = None;
        for item in v.try_iter()? {
            let item = item?;
            let j = match last {
                Some((p, j)) if p == item.as_ptr() => j,
                _ => {
                    let text = match item.cast::<PyString>() {
                        Ok(s) => s.clone(),
                        Err(_) => item.str()?,
                    };
                    let text = text.to_cow()?;
                    let text: &str = &text;
                    let j = match index.get(text) {
                        Some(&j) => j,
                        None => {
                            let j = t.table.len() as u32;
                            index.insert(text.to_owned(), j);
                            t.table.push(text.to_owned());
                            j
                        }
                    };
                    last = Some((item.as_ptr(), j));
                    j
                }
            };
            t.of.push(j);
        }
        Ok(t)
    }

    fn get(&self, i: usize) -> &str {
        let j = self.of.get(i).copied().unwrap_or(0) as usize;
        self.table.get(j).map_or("", String::as_str)
    }
}

/// The trace as columns, read by the simulator request by request.
struct Columns {
    t: Vec<Nanos>,
    paths: Texts,
    methods: Texts,
    header_sets: Vec<Vec<(String, String)>>,
    /// Per request, its set (none: every request has set 0, or none at all).
    header_of: Vec<u32>,
}

impl Trace for Columns {
    fn len(&self) -> usize {
        self.t.len()
    }
    fn arrival(&self, i: usize) -> Nanos {
        self.t[i]
    }
    fn request(&self, i: usize) -> TraceItem<'_> {
        let set = self.header_of.get(i).copied().unwrap_or(0) as usize;
        TraceItem {
            method: self.methods.get(i),
            path: self.paths.get(i),
            headers: self.header_sets.get(set).map_or(&[][..], Vec::as_slice),
            client_ip: None,
        }
    }
}

/// The result columns, written at each request's index as requests finish.
struct Out {
    status: Vec<u16>,
    attempts: Vec<u32>,
    duration: Vec<f64>,
    queue: Vec<f64>,
    /// Index into `routes`.
    route: Vec<u32>,
    /// Index into `Outcome::ALL`.
    reason: Vec<u8>,
    routes: Vec<RouteName>,
}

impl Out {
    fn new(n: usize) -> Out {
        Out {
            status: vec![0; n],
            attempts: vec![0; n],
            duration: vec![0.0; n],
            queue: vec![0.0; n],
            route: vec![0; n],
            reason: vec![0; n],
            routes: Vec::new(),
        }
    }

    fn put(&mut self, i: usize, r: &SimRecord) {
        self.status[i] = r.status;
        self.attempts[i] = r.attempts;
        self.duration[i] = r.duration.as_secs_f64();
        self.queue[i] = r.queue.as_secs_f64();
        // A config has few routes: a scan of the ones seen beats hashing the id.
        let j = match self.routes.iter().position(|x| *x == r.route) {
            Some(j) => j,
            None => {
                self.routes.push(r.route.clone());
                self.routes.len() - 1
            }
        };
        self.route[i] = j as u32;
        self.reason[i] = r.outcome as u8;
    }
}

/// A column as native-endian bytes in a new `bytes` object (one copy).
fn bytes_of<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    v: &[T],
    f: fn(T) -> [u8; N],
) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, v.len() * N, |b| {
        for (dst, x) in b.chunks_exact_mut(N).zip(v) {
            dst.copy_from_slice(&f(*x));
        }
        Ok(())
    })
}
