//! `weir.Simulation`'s native half: weir-policy's virtual-time simulator
//! ([`weir_policy::sim`]), the very engine of the gateways, over Python columns.
//!
//! Glue only: the Python wrapper (`weir/_simulation.py`) normalises arguments (a config
//! path or text, one headers dict or one per request); this side converts them into
//! [`SimRequest`]s, runs the whole trace without the GIL, and hands back the numeric
//! columns as native-endian bytes (zero-copy into numpy through `memoryview`) and the
//! route / outcome names as lists of shared `str` objects.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use weir_core::Nanos;
use weir_policy::sim::{SimRequest, Simulation, UpstreamModel};

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
    #[allow(clippy::type_complexity)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        times: Vec<f64>,
        paths: Vec<String>,
        methods: Option<Vec<String>>,
        headers: Vec<Bound<'py, PyDict>>,
    ) -> PyResult<(
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyList>,
        Bound<'py, PyList>,
    )> {
        let n = times.len();
        if paths.len() != n {
            return Err(PyValueError::new_err(format!(
                "paths has {} items but times has {n}",
                paths.len()
            )));
        }
        if let Some(m) = &methods
            && m.len() != n
        {
            return Err(PyValueError::new_err(format!(
                "methods has {} items but times has {n}",
                m.len()
            )));
        }
        if headers.len() != n && headers.len() > 1 {
            return Err(PyValueError::new_err(format!(
                "headers has {} items but times has {n}",
                headers.len()
            )));
        }
        let dict_headers = |d: &Bound<'py, PyDict>| -> PyResult<Vec<(String, String)>> {
            d.iter()
                .map(|(k, v)| {
                    let k: String = k.extract()?;
                    let v: String = v.extract()?;
                    Ok((k.to_ascii_lowercase(), v))
                })
                .collect()
        };
        let shared = match headers.as_slice() {
            [one] if n != 1 => Some(dict_headers(one)?),
            _ => None,
        };
        let mut reqs = Vec::with_capacity(n);
        for (i, (t, path)) in times.into_iter().zip(paths).enumerate() {
            let h = match (&shared, headers.get(i)) {
                (Some(s), _) => s.clone(),
                (None, Some(d)) => dict_headers(d)?,
                (None, None) => Vec::new(),
            };
            reqs.push(SimRequest {
                t: nanos(&format!("times[{i}]"), t)?,
                method: methods.as_ref().map(|m| m[i].clone()).unwrap_or_default(),
                path,
                headers: h,
                client_ip: None,
            });
        }
        let sim = self.lock();
        let records = py
            .detach(|| sim.run(&reqs))
            .map_err(|e| PyValueError::new_err(format!("config: {e}")))?;
        drop(sim);
        let mut status = Vec::with_capacity(2 * n);
        let mut attempts = Vec::with_capacity(4 * n);
        let mut duration = Vec::with_capacity(8 * n);
        let mut queue = Vec::with_capacity(8 * n);
        // One `str` object per distinct name, shared by every row.
        let mut names: HashMap<&str, Bound<'py, PyString>> = HashMap::new();
        let route = PyList::empty(py);
        let reason = PyList::empty(py);
        for r in &records {
            status.extend_from_slice(&r.status.to_ne_bytes());
            attempts.extend_from_slice(&r.attempts.to_ne_bytes());
            duration.extend_from_slice(&r.duration.as_secs_f64().to_ne_bytes());
            queue.extend_from_slice(&r.queue.as_secs_f64().to_ne_bytes());
            for (list, name) in [(&route, r.route.as_str()), (&reason, r.outcome.as_str())] {
                let s = names.entry(name).or_insert_with(|| PyString::new(py, name));
                list.append(&*s)?;
            }
        }
        Ok((
            PyBytes::new(py, &status),
            PyBytes::new(py, &attempts),
            PyBytes::new(py, &duration),
            PyBytes::new(py, &queue),
            route,
            reason,
        ))
    }
}
