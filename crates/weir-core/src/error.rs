//! Configuration errors shared by every primitive: a constructor given an impossible value
//! says which one.
//!
//! Bad parameters are rejected once, at construction, so the hot path never has to
//! check them (and never panics on them). The variants name the offending field with the
//! spelling the frontends' config files use.

use core::fmt;

/// An impossible configuration value, naming the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigError {
    /// The named parameter must be non-zero (`rate`, `per`, `burst`, `limit`, `window`, …).
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
    /// A value outside its documented range (e.g. a ratio above its maximum, a window
    /// wider than the fixed capacity).
    OutOfRange(&'static str),
    /// Two values in the wrong order: `low` must not exceed `high` (e.g. `base` > `max`).
    Order {
        /// The field that must be the smaller.
        low: &'static str,
        /// The field that must be the larger.
        high: &'static str,
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
            ConfigError::OutOfRange(field) => write!(f, "`{field}` is out of range"),
            ConfigError::Order { low, high } => {
                write!(f, "`{low}` must not be greater than `{high}`")
            }
        }
    }
}

impl core::error::Error for ConfigError {}
