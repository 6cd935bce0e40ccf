//! One rate limit: an algorithm and its validated parameters, as one value.
//!
//! **Why.** Every layer above the core — the config compiler, the keyed local tables, the
//! global store's scripts, the Python classes — needs to say "this limit" and to branch on
//! its algorithm. When each layer had its own enum of the same five shapes, the field-by-field
//! conversions between them let the layers drift (three different sliding-log caps). A
//! [`Limit`] holds the core's own config of its algorithm, so it is valid by construction
//! (each constructor is the algorithm's), and it is `Copy`: the engine hands the same value to
//! a keyed table or to the global store unchanged.
//!
//! **Caps.** The sliding log remembers every admitted unit, so its `limit` is bounded by
//! [`MAX_SLIDING_LOG_LIMIT`] — the one cap every frontend (config file, Python, Redis)
//! applies. Fixed-window and sliding-window limits are bounded by their packed state words
//! ([`crate::window::MAX_FIXED_LIMIT`], [`crate::window::MAX_SLIDING_LIMIT`]).
//!
//! ```
//! use weir_core::{Limit, LimitKind, Nanos};
//! let l = Limit::token_bucket(2, Nanos::from_secs(60), 2).unwrap();
//! assert_eq!(l.kind(), LimitKind::TokenBucket);
//! assert_eq!(l.quota_window(), (2, Nanos::from_secs(60)));
//! assert!(Limit::sliding_log(weir_core::MAX_SLIDING_LOG_LIMIT + 1, Nanos::from_secs(1)).is_err());
//! ```

use crate::error::ParamError;
use crate::leaky_bucket::LeakyBucketConfig;
use crate::sliding_log::SlidingLogConfig;
use crate::time::Nanos;
use crate::token_bucket::TokenBucketConfig;
use crate::window::{FixedWindowConfig, SlidingWindowConfig};

/// The largest `limit` of a sliding log, everywhere (8 bytes per remembered unit: 256 KiB
/// for one full log). Use the sliding-window counter for larger limits.
pub const MAX_SLIDING_LOG_LIMIT: u64 = 32_768;

/// [`MAX_SLIDING_LOG_LIMIT`] as a log capacity.
pub const MAX_SLIDING_LOG_LEN: usize = MAX_SLIDING_LOG_LIMIT as usize;

/// Sliding-log parameters bounded by the one cap ([`MAX_SLIDING_LOG_LIMIT`]). A log of a
/// smaller capacity `M` is had with [`SlidingLogConfig::new`]`(l.limit(), l.window())`.
pub type SlidingLogLimit = SlidingLogConfig<MAX_SLIDING_LOG_LEN>;

/// The algorithm of a [`Limit`], with its config-file spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// GCRA token bucket: `rate` per `per`, `burst`.
    TokenBucket,
    /// nginx `limit_req`: `rate` per `per`, `burst` excess, `delay` or `nodelay`.
    LeakyBucket,
    /// `limit` per aligned `window`.
    FixedWindow,
    /// Weighted two-window counter: `limit` per `window`.
    SlidingWindow,
    /// Exact sliding log: `limit` per `window`.
    SlidingLog,
}

impl LimitKind {
    /// Every kind, in the order of [`LimitKind::NAMES`].
    pub const ALL: [LimitKind; 5] = [
        LimitKind::TokenBucket,
        LimitKind::LeakyBucket,
        LimitKind::FixedWindow,
        LimitKind::SlidingWindow,
        LimitKind::SlidingLog,
    ];
    /// The config spellings.
    pub const NAMES: [&'static str; 5] = [
        "token_bucket",
        "leaky_bucket",
        "fixed_window",
        "sliding_window",
        "sliding_log",
    ];

    /// The config spelling (`"token_bucket"`, ...).
    pub const fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The kind of a config spelling.
    pub fn parse(s: &str) -> Option<LimitKind> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
    }

    /// Buckets take `rate`, `per`, `burst`; windows take `limit`, `window`.
    pub const fn is_bucket(self) -> bool {
        matches!(self, LimitKind::TokenBucket | LimitKind::LeakyBucket)
    }
}

/// One rate limit: the algorithm with its validated core config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// GCRA token bucket.
    TokenBucket(TokenBucketConfig),
    /// nginx-style leaky bucket.
    LeakyBucket(LeakyBucketConfig),
    /// Fixed window counter.
    FixedWindow(FixedWindowConfig),
    /// Sliding window counter.
    SlidingWindow(SlidingWindowConfig),
    /// Exact sliding log (`limit ≤` [`MAX_SLIDING_LOG_LIMIT`]).
    SlidingLog(SlidingLogLimit),
}

impl Limit {
    /// [`TokenBucketConfig::new`].
    pub const fn token_bucket(rate: u64, per: Nanos, burst: u64) -> Result<Limit, ParamError> {
        match TokenBucketConfig::new(rate, per, burst) {
            Ok(c) => Ok(Limit::TokenBucket(c)),
            Err(e) => Err(e),
        }
    }

    /// [`LeakyBucketConfig::new`].
    pub fn leaky_bucket(
        rate: u64,
        per: Nanos,
        burst: u64,
        delay: u64,
        nodelay: bool,
    ) -> Result<Limit, ParamError> {
        LeakyBucketConfig::new(rate, per, burst, delay, nodelay).map(Limit::LeakyBucket)
    }

    /// [`FixedWindowConfig::new`].
    pub const fn fixed_window(limit: u64, window: Nanos) -> Result<Limit, ParamError> {
        match FixedWindowConfig::new(limit, window) {
            Ok(c) => Ok(Limit::FixedWindow(c)),
            Err(e) => Err(e),
        }
    }

    /// [`SlidingWindowConfig::new`].
    pub const fn sliding_window(limit: u64, window: Nanos) -> Result<Limit, ParamError> {
        match SlidingWindowConfig::new(limit, window) {
            Ok(c) => Ok(Limit::SlidingWindow(c)),
            Err(e) => Err(e),
        }
    }

    /// A sliding log; `limit ≤` [`MAX_SLIDING_LOG_LIMIT`].
    pub const fn sliding_log(limit: u64, window: Nanos) -> Result<Limit, ParamError> {
        match SlidingLogLimit::new(limit, window) {
            Ok(c) => Ok(Limit::SlidingLog(c)),
            Err(e) => Err(e),
        }
    }

    /// The algorithm.
    pub const fn kind(&self) -> LimitKind {
        match self {
            Limit::TokenBucket(_) => LimitKind::TokenBucket,
            Limit::LeakyBucket(_) => LimitKind::LeakyBucket,
            Limit::FixedWindow(_) => LimitKind::FixedWindow,
            Limit::SlidingWindow(_) => LimitKind::SlidingWindow,
            Limit::SlidingLog(_) => LimitKind::SlidingLog,
        }
    }

    /// The quota and its period: `(rate, per)` for buckets, `(limit, window)` for windows
    /// (what the IETF `RateLimit-Policy` field advertises).
    pub fn quota_window(&self) -> (u64, Nanos) {
        match self {
            Limit::TokenBucket(c) => (c.rate(), c.per()),
            Limit::LeakyBucket(c) => (c.rate(), c.per()),
            Limit::FixedWindow(c) => (c.limit(), c.window()),
            Limit::SlidingWindow(c) => (c.limit(), c.window()),
            Limit::SlidingLog(c) => (c.limit(), c.window()),
        }
    }

    /// The largest cost ever admissible at once: `burst` (token bucket), `burst + 1`
    /// (leaky bucket: the request itself plus its excess), `limit` (windows).
    pub fn capacity(&self) -> u64 {
        match self {
            Limit::TokenBucket(c) => c.burst(),
            Limit::LeakyBucket(c) => c.burst().saturating_add(1),
            Limit::FixedWindow(c) => c.limit(),
            Limit::SlidingWindow(c) => c.limit(),
            Limit::SlidingLog(c) => c.limit(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_their_names() {
        for k in LimitKind::ALL {
            assert_eq!(LimitKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(LimitKind::parse("magic"), None);
    }

    #[test]
    fn constructors_are_the_algorithms() {
        let s = Nanos::from_secs(1);
        assert_eq!(Limit::token_bucket(0, s, 1), Err(ParamError::Zero("rate")));
        assert!(Limit::leaky_bucket(1, s, 0, 0, false).is_ok());
        assert_eq!(Limit::fixed_window(3, s).unwrap().capacity(), 3);
        assert_eq!(Limit::leaky_bucket(1, s, 4, 0, true).unwrap().capacity(), 5);
        assert!(Limit::sliding_window(0, s).is_err());
        assert!(Limit::sliding_log(MAX_SLIDING_LOG_LIMIT, s).is_ok());
        assert_eq!(
            Limit::sliding_log(MAX_SLIDING_LOG_LIMIT + 1, s),
            Err(ParamError::LimitAboveCapacity {
                limit: MAX_SLIDING_LOG_LIMIT + 1,
                capacity: MAX_SLIDING_LOG_LIMIT
            })
        );
    }
}
