//! Configuration errors: a constructor given an impossible value says which one.
//!
//! Constructors validate once so the hot paths never have to (and never panic). The
//! variants name the offending field with the spelling the frontends' config files use.

use core::fmt;

/// An impossible configuration value, naming the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigError {
    /// A value that must be positive was zero.
    Zero(&'static str),
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
            ConfigError::Zero(field) => write!(f, "`{field}` must be greater than zero"),
            ConfigError::OutOfRange(field) => write!(f, "`{field}` is out of range"),
            ConfigError::Order { low, high } => {
                write!(f, "`{low}` must not be greater than `{high}`")
            }
        }
    }
}

#[cfg(feature = "std")]
impl core::error::Error for ConfigError {}
