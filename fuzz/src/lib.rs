//! Checkers for weir-core's fuzz targets.
//!
//! Each target in `fuzz_targets/` decodes an [`arbitrary`] operation sequence and hands it
//! to one `check` function here. A checker drives a primitive's single-owner form, its
//! shared form and a reference model side by side (differential), and asserts the
//! invariants that must hold on any input: no panic, never admit more than the exact model,
//! `retry_after` consistent with what a later call would get, shared == single-owner.
//! A failed assertion is a crash for libFuzzer. See `docs/VERIFICATION.md`.

pub mod backoff_deadline;
pub mod batch;
pub mod breaker;
pub mod keyed;
pub mod leaky_bucket;
pub mod num;
pub mod outlier;
pub mod retry_budget;
pub mod semaphore;
pub mod times;
pub mod token_bucket;
pub mod windows;
