//! Parameter errors shared by every primitive: a constructor given an impossible value
//! says which one. Named `ParamError`, not `ConfigError`: weir-policy's `ConfigError` is a
//! different thing (a config file's error, with file, line and key), and one name for both
//! made every crate that sees the two alias one of them.
//!
//! Bad parameters are rejected once, at construction, so the hot path never has to
//! check them (and never panics on them). The variants name the offending field with the
//! spelling the frontends' config files use.

use core::fmt;

/// An impossible parameter value, naming the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamError {
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

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamError::Zero(p) => write!(f, "`{p}` must be greater than zero"),
            ParamError::TooLarge(p) => {
                write!(f, "`{p}` is too large for exact integer arithmetic")
            }
            ParamError::LimitAboveCapacity { limit, capacity } => {
                write!(f, "limit {limit} exceeds the log capacity {capacity}")
            }
            ParamError::OutOfRange(field) => write!(f, "`{field}` is out of range"),
            ParamError::Order { low, high } => {
                write!(f, "`{low}` must not be greater than `{high}`")
            }
        }
    }
}

impl core::error::Error for ParamError {}
