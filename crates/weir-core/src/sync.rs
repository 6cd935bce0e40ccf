//! The one place atomics come from: `portable-atomic` normally, `loom` under the
//! namespaced `--cfg weir_loom` (a plain `--cfg loom` would switch dependencies too).

#[cfg(not(weir_loom))]
#[allow(unused_imports)]
pub(crate) use portable_atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(weir_loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
