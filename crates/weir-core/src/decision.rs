//! What every rate-limiting primitive answers: data, not a bare `bool`.
//!
//! A [`Decision`] carries enough for a frontend to write `Retry-After` and the IETF
//! `RateLimit` fields without asking the limiter again.

use crate::time::Nanos;
use core::fmt;

/// The verdict of one acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Pass now.
    Admit,
    /// Pass after waiting this long (leaky bucket with `burst` above `delay`). The
    /// capacity is already consumed; the caller must hold the request this long.
    Delay(Nanos),
    /// Do not pass. State was not changed.
    Reject,
}

/// The full answer of a limiter to one acquisition (or a `peek`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Admit, delay or reject.
    pub verdict: Verdict,
    /// Whole further admissions of cost 1 possible right after this decision (without delay).
    pub remaining: u64,
    /// For [`Verdict::Reject`]: time from now until this cost would be admitted. Zero otherwise.
    pub retry_after: Nanos,
    /// Time from now until `remaining` next grows; zero when the limiter is full (idle).
    pub reset_after: Nanos,
}

impl Decision {
    /// True for [`Verdict::Admit`] and [`Verdict::Delay`].
    pub const fn is_allowed(&self) -> bool {
        !matches!(self.verdict, Verdict::Reject)
    }
    /// The delay before passing ([`Nanos::ZERO`] unless [`Verdict::Delay`]).
    pub const fn delay(&self) -> Nanos {
        match self.verdict {
            Verdict::Delay(d) => d,
            _ => Nanos::ZERO,
        }
    }
}

/// A cost that can never be admitted: it exceeds the limiter's capacity (burst or window
/// limit). Distinct from a denial because waiting will not help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InsufficientCapacity {
    /// The cost asked for.
    pub cost: u64,
    /// The most the limiter can ever admit at once.
    pub capacity: u64,
}

impl fmt::Display for InsufficientCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cost {} exceeds capacity {}", self.cost, self.capacity)
    }
}

impl core::error::Error for InsufficientCapacity {}
