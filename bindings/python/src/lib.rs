//! `weir._weir`: the native half of the `weir` Python package.
//!
//! Glue only: every decision is made by `weir-core`'s primitives (the exact production
//! decisions), and `weir.Simulation` runs `weir-policy`'s engine itself on virtual time; this crate converts arguments (float seconds ↔ [`weir_core::Nanos`], see
//! the `time` module), maps outcomes to exceptions in one place (`errors`) and wraps
//! results.
//! Objects are `#[pyclass(frozen)]` over the core's lock-free shared forms, so they are
//! thread-safe without a `Mutex` or pyo3's borrow flag on the hot path.

mod decision;
mod errors;
mod fill;
mod limiters;
mod quota;
mod replay;
mod resilience;
mod simulation;
mod time;

use pyo3::prelude::*;

/// `m.add_class::<T>()?` for each listed class.
macro_rules! add_classes {
    ($m:ident, $($class:ty),+ $(,)?) => {
        $($m.add_class::<$class>()?;)+
    };
}

#[pymodule]
fn _weir(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_classes!(
        m,
        time::PyManualClock,
        decision::PyDecision,
        limiters::PyTokenBucket,
        limiters::PyLeakyBucket,
        limiters::PyFixedWindow,
        limiters::PySlidingWindow,
        limiters::PySlidingLog,
        resilience::PySemaphore,
        resilience::PyPermit,
        resilience::PyDeadline,
        resilience::PyRetryBudget,
        resilience::PyBackoff,
        resilience::PyCircuitBreaker,
        simulation::PySimulation,
        quota::PyQuota,
        replay::PyColumns,
    );
    m.add_function(wrap_pyfunction!(replay::_replay, m)?)?;
    m.add_function(wrap_pyfunction!(replay::_split_wait, m)?)?;
    #[cfg(feature = "bench-hooks")]
    {
        m.add_function(wrap_pyfunction!(replay::_bench_core_loop, m)?)?;
        m.add_class::<replay::PyProbe>()?;
    }
    // The package version is the crate's (pyproject's version is dynamic: maturin reads it
    // from Cargo.toml), so the two cannot disagree.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_SLIDING_LOG_LIMIT", limiters::MAX_LOG_LIMIT)?;
    m.add(
        "InsufficientCapacity",
        m.py().get_type::<errors::InsufficientCapacity>(),
    )?;
    Ok(())
}
