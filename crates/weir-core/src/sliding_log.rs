//! Exact sliding log with a compile-time capacity.
//!
//! # Why
//! The only window limiter with no error: it remembers the instant of every admitted unit
//! in the last `window` and admits `cost` iff fewer than `limit − cost + 1` of them are
//! younger than `window`. Exactly `limit` in *every* interval of length `window` — at the
//! price of `8·N` bytes per limiter. `N` is a const generic, so memory is fixed and known
//! at compile time; `limit ≤ N` is validated at construction.
//!
//! An event at instant `t` counts while `now < t + window` (the log covers
//! `(now − window, now]`); `t + window` saturates at `Nanos::MAX` (such an event never
//! expires: conservative).
//!
//! # Single-owner only
//! A lock-free log would need a multi-word atomic update (push several entries and move the
//! head together); a spin lock would be simple but is not lock-free. So the log has only the
//! `&mut self` form; share it behind the frontend's own mutex, or use the sliding-window
//! counter, whose shared form is lock-free.
//!
//! # Clock going backwards
//! The log keeps the latest instant seen; an earlier instant is treated as that instant
//! ("no time passed"), so a rewind never frees entries. Times in decisions are measured
//! from the given `now`.
//!
//! ```
//! use weir_core::{Nanos, SlidingLog, Verdict};
//! let mut log = SlidingLog::<4>::new(2, Nanos::from_secs(1)).unwrap();
//! assert!(log.acquire(Nanos::from_millis(0), 1).unwrap().is_allowed());
//! assert!(log.acquire(Nanos::from_millis(600), 1).unwrap().is_allowed());
//! let d = log.acquire(Nanos::from_millis(900), 1).unwrap();
//! assert_eq!(d.verdict, Verdict::Reject);
//! assert_eq!(d.retry_after, Nanos::from_millis(100)); // the event at 0 leaves at 1 s
//! ```

use crate::decision::{Decision, InsufficientCapacity, Verdict};
use crate::error::ConfigError;
use crate::limiter::{Algorithm, Limiter};
use crate::time::Nanos;

/// Validated sliding-log parameters for a log of capacity `N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingLogConfig<const N: usize> {
    limit: u64,
    window: Nanos,
}

/// The log: a ring of admitted instants (oldest first) and the latest instant seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlidingLogState<const N: usize> {
    ring: [u64; N],
    head: usize,
    len: usize,
    latest: u64,
}

impl<const N: usize> SlidingLogState<N> {
    const EMPTY: Self = SlidingLogState {
        ring: [0; N],
        head: 0,
        len: 0,
        latest: 0,
    };

    /// The `i`-th oldest entry (`i < len`).
    fn get(&self, i: usize) -> u64 {
        let j = self.head + i;
        // len ≤ N, head < N: j < 2N.
        let j = if j >= N { j - N } else { j };
        self.ring.get(j).copied().unwrap_or(u64::MAX)
    }

    /// Number of entries at the front already expired at `now`.
    fn expired(&self, window: u64, now: u64) -> usize {
        let mut i = 0;
        while i < self.len && self.get(i).saturating_add(window) <= now {
            i += 1;
        }
        i
    }

    /// Entries currently stored (some may be expired).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<const N: usize> SlidingLogConfig<N> {
    /// `limit` admissions in any interval of length `window`; `0 < limit ≤ N`.
    pub const fn new(limit: u64, window: Nanos) -> Result<Self, ConfigError> {
        if limit == 0 {
            return Err(ConfigError::Zero("limit"));
        }
        if window.0 == 0 {
            return Err(ConfigError::Zero("window"));
        }
        if limit > N as u64 {
            return Err(ConfigError::LimitAboveCapacity {
                limit,
                capacity: N as u64,
            });
        }
        Ok(SlidingLogConfig { limit, window })
    }
    /// The limit per window.
    pub const fn limit(&self) -> u64 {
        self.limit
    }
    /// The window length.
    pub const fn window(&self) -> Nanos {
        self.window
    }

    /// Decision at `now` with `skip` expired entries at the front.
    fn decide(&self, s: &SlidingLogState<N>, now: Nanos, eff: u64, cost: u64) -> Decision {
        let w = self.window.0;
        let skip = s.expired(w, eff);
        let live = (s.len - skip) as u64;
        let expiry = |i: usize| Nanos(s.get(skip + i).saturating_add(w)) - now;
        if live + cost <= self.limit {
            let remaining = self.limit - live - cost;
            let reset_after = if live > 0 {
                expiry(0)
            } else if cost > 0 {
                Nanos(eff.saturating_add(w)) - now
            } else {
                Nanos::ZERO
            };
            Decision {
                verdict: Verdict::Admit,
                remaining,
                retry_after: Nanos::ZERO,
                reset_after,
            }
        } else {
            // `live + cost − limit` entries must leave; the last of them is this one.
            let i = (live + cost - self.limit - 1) as usize;
            Decision {
                verdict: Verdict::Reject,
                remaining: self.limit.saturating_sub(live),
                retry_after: expiry(i),
                reset_after: expiry(0),
            }
        }
    }
}

impl<const N: usize> Algorithm for SlidingLogConfig<N> {
    type State = SlidingLogState<N>;

    fn fresh_state(&self) -> SlidingLogState<N> {
        SlidingLogState::EMPTY
    }

    fn acquire_state(
        &self,
        s: &mut SlidingLogState<N>,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity> {
        if cost > self.limit {
            return Err(InsufficientCapacity {
                cost,
                capacity: self.limit,
            });
        }
        let eff = now.0.max(s.latest);
        s.latest = eff;
        // Drop expired entries for good.
        let skip = s.expired(self.window.0, eff);
        s.head = (s.head + skip) % N.max(1);
        s.len -= skip;
        let d = self.decide(s, now, eff, cost);
        if d.is_allowed() {
            for _ in 0..cost {
                // len + cost ≤ limit ≤ N.
                let j = (s.head + s.len) % N.max(1);
                if let Some(slot) = s.ring.get_mut(j) {
                    *slot = eff;
                    s.len += 1;
                }
            }
        }
        Ok(d)
    }

    fn peek_state(
        &self,
        s: &SlidingLogState<N>,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity> {
        if cost > self.limit {
            return Err(InsufficientCapacity {
                cost,
                capacity: self.limit,
            });
        }
        Ok(self.decide(s, now, now.0.max(s.latest), cost))
    }

    fn is_fresh_state(&self, s: &SlidingLogState<N>, now: Nanos) -> bool {
        let eff = now.0.max(s.latest);
        s.expired(self.window.0, eff) == s.len
    }

    fn capacity(&self) -> u64 {
        self.limit
    }
}

/// A single-owner exact sliding log of capacity `N`; see the [module docs](self).
pub type SlidingLog<const N: usize> = Limiter<SlidingLogConfig<N>>;

impl<const N: usize> Limiter<SlidingLogConfig<N>> {
    /// An empty log: `limit ≤ N` admissions per sliding `window`.
    pub const fn new(limit: u64, window: Nanos) -> Result<Self, ConfigError> {
        match SlidingLogConfig::new(limit, window) {
            Ok(algorithm) => Ok(Limiter {
                algorithm,
                state: SlidingLogState::EMPTY,
            }),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_window() {
        let mut log = SlidingLog::<8>::new(3, Nanos(100)).unwrap();
        assert!(log.acquire(Nanos(0), 2).unwrap().is_allowed());
        assert!(log.acquire(Nanos(50), 1).unwrap().is_allowed());
        let d = log.acquire(Nanos(60), 2).unwrap();
        assert_eq!(d.verdict, Verdict::Reject);
        assert_eq!(d.retry_after, Nanos(40)); // both entries at 0 leave at 100
        assert_eq!(d.reset_after, Nanos(40));
        assert!(log.acquire(Nanos(100), 2).unwrap().is_allowed());
        // Rewind: no entries freed.
        assert!(!log.acquire(Nanos(0), 1).unwrap().is_allowed());
        assert!(log.is_fresh(Nanos(250)));
        assert!(!log.is_fresh(Nanos(199)));
        assert!(log.acquire(Nanos(0), 4).is_err());
        assert_eq!(
            SlidingLogConfig::<2>::new(3, Nanos(1)),
            Err(ConfigError::LimitAboveCapacity {
                limit: 3,
                capacity: 2
            })
        );
        let mut log = SlidingLog::<2>::new(2, Nanos::MAX).unwrap();
        for now in [u64::MAX, 0, 5] {
            let _ = log.acquire(Nanos(now), 2);
        }
    }
}
