//! Configuration errors shared by every rate-limiting primitive.
//!
//! Bad parameters are rejected once, at construction, so the hot path never has to
//! check them (and never panics on them).

use core::fmt;

/// A limiter parameter that cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigError {
    /// The named parameter must be non-zero (`rate`, `per`, `burst`, `limit`, `window`).
    Zero(&'static str),
    /// The named parameter (or a product of parameters, e.g. `burst × per / rate`) is too
    /// large for the exact integer representation; the item docs give the bound.
    TooLarge(&'static str),
    /// A window `limit` above the fixed capacity of a sliding log.
    LimitAboveCapacity {
        /// The limit asked for.
        limit: u64,
        /// The log's compile-time capacity `N`.
        capacity: u64,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Zero(p) => write!(f, "`{p}` must be greater than zero"),
            ConfigError::TooLarge(p) => {
                write!(f, "`{p}` is too large for exact integer arithmetic")
            }
            ConfigError::LimitAboveCapacity { limit, capacity } => {
                write!(f, "limit {limit} exceeds the log capacity {capacity}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ConfigError {}
