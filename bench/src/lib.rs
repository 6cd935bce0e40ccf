//! Shared pieces of weir's benchmark suites (`benches/`, one file per suite) and of the
//! accuracy suite (`src/bin/accuracy.rs`, `tests/accuracy.rs`).

pub mod accuracy;
mod alloc;
mod floor;

pub use alloc::{CountingAlloc, allocated_bytes};
pub use floor::cas_step;
