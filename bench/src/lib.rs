//! Shared pieces of weir's benchmark suites (`benches/`, one file per suite) and of the
//! accuracy suite (`src/bin/accuracy.rs`, `tests/accuracy.rs`).

pub mod accuracy;
mod alloc;
mod floor;

pub use alloc::{CountingAlloc, allocated_bytes};
pub use floor::cas_step;

/// The governor quota every peer row uses: 1 per second with a burst of `u32::MAX`, so
/// `check()` admits without time passing.
pub fn governor_quota() -> governor::Quota {
    governor::Quota::with_period(std::time::Duration::from_secs(1))
        .expect("non-zero")
        .allow_burst(std::num::NonZeroU32::MAX)
}
