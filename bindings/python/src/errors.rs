//! Every mapping from a core outcome to a Python exception lives here.

use pyo3::create_exception;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyInt;

create_exception!(
    weir,
    InsufficientCapacity,
    pyo3::exceptions::PyValueError,
    "A cost that can never be admitted: it exceeds the limiter's burst or limit. Waiting will \
     not help. Attributes: `cost`, `capacity`."
);

/// `weir.InsufficientCapacity` with `.cost` and `.capacity` set.
pub(crate) fn insufficient(py: Python<'_>, e: weir_core::InsufficientCapacity) -> PyErr {
    let err = InsufficientCapacity::new_err(format!(
        "cost {} exceeds the limiter's capacity {}: it can never be admitted",
        e.cost, e.capacity
    ));
    let v = err.value(py);
    let _ = v.setattr("cost", e.cost);
    let _ = v.setattr("capacity", e.capacity);
    err
}

/// A non-negative integer argument (an `int` or anything with `__index__`); negative or too
/// large is a `ValueError`, a non-integer a `TypeError`, both naming the argument.
pub(crate) fn count(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(n) = v.extract::<u64>() {
        return Ok(n);
    }
    let is_int = v.is_instance_of::<PyInt>() || v.hasattr("__index__").unwrap_or(false);
    if is_int {
        Err(PyValueError::new_err(format!(
            "{name} must be an integer in 0..=2**64-1, got {}",
            v.repr().map(|r| r.to_string()).unwrap_or_default()
        )))
    } else {
        Err(PyTypeError::new_err(format!(
            "{name} must be an int, not {}",
            v.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        )))
    }
}

/// Like [`count`], and zero is a `ValueError`.
pub(crate) fn positive_count(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    let n = count(name, v)?;
    if n == 0 {
        return Err(PyValueError::new_err(format!("{name} must be > 0, got 0")));
    }
    Ok(n)
}

/// A core configuration error as a `ValueError`; the core's message names the parameter.
pub(crate) fn config(e: weir_core::ParamError) -> PyErr {
    PyValueError::new_err(e.to_string().replace('`', ""))
}
