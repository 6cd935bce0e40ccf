//! A total time budget for one request, split between its attempts.
//!
//! **Why.** Per-try timeouts alone let retries multiply the latency a client sees
//! (3 tries × 200 ms = 600 ms past a 500 ms promise), and a retry started with 2 ms left is
//! pure waste upstream. A [`Deadline`] fixes the *total* up front; each attempt gets
//! `min(per_try, remaining)`, and an attempt whose backoff would leave less than a useful
//! minimum is not started at all. The remaining budget is what to propagate downstream
//! (e.g. as a `grpc-timeout`-style header).
//!
//! **Bounds.** Pure arithmetic on [`Nanos`], saturating. A clock reading earlier than
//! `start` counts as "no time has passed", so `remaining(now) <= total` always, whatever
//! the clock does. No state changes: `Deadline` is `Copy` and shared freely.

use crate::time::Nanos;

/// A budget of `total` starting at `start`.
///
/// ```
/// use weir_core::{Deadline, Nanos};
/// let d = Deadline::new(Nanos::ZERO, Nanos::from_millis(500));
/// let now = Nanos::from_millis(350);
/// assert_eq!(d.remaining(now), Nanos::from_millis(150));
/// assert_eq!(d.per_try(now, Nanos::from_millis(200)), Nanos::from_millis(150));
/// // a retry after 100 ms of backoff would have 50 ms left: not worth starting with min 60 ms
/// assert!(!d.can_start_attempt(now, Nanos::from_millis(100), Nanos::from_millis(60)));
/// assert!(d.can_start_attempt(now, Nanos::from_millis(100), Nanos::from_millis(10)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Deadline {
    start: Nanos,
    total: Nanos,
}

impl Deadline {
    /// A budget of `total` from `start`.
    pub const fn new(start: Nanos, total: Nanos) -> Self {
        Deadline { start, total }
    }
    /// When the budget started.
    pub const fn start(&self) -> Nanos {
        self.start
    }
    /// The whole budget.
    pub const fn total(&self) -> Nanos {
        self.total
    }
    /// The instant the budget runs out (saturating at [`Nanos::MAX`]).
    pub const fn ends_at(&self) -> Nanos {
        self.start.saturating_add(self.total)
    }
    /// Time spent since `start`; zero if `now` is earlier (clock went backwards).
    #[inline]
    pub const fn elapsed(&self, now: Nanos) -> Nanos {
        now.saturating_sub(self.start)
    }
    /// Time left; never more than `total`, zero once spent.
    #[inline]
    pub const fn remaining(&self, now: Nanos) -> Nanos {
        self.total.saturating_sub(self.elapsed(now))
    }
    /// True once nothing remains.
    #[inline]
    pub const fn expired(&self, now: Nanos) -> bool {
        self.remaining(now).is_zero()
    }
    /// The timeout for an attempt starting now: `min(cap, remaining)`.
    #[inline]
    pub const fn per_try(&self, now: Nanos, cap: Nanos) -> Nanos {
        cap.min(self.remaining(now))
    }
    /// True iff, after waiting `backoff`, at least `min_useful` (and more than zero) would
    /// remain: the rule "no try starts that cannot finish".
    #[inline]
    pub const fn can_start_attempt(&self, now: Nanos, backoff: Nanos, min_useful: Nanos) -> bool {
        let left = self.remaining(now).saturating_sub(backoff);
        !left.is_zero() && left.0 >= min_useful.0
    }
    /// The budget of an attempt starting now with per-try cap `cap`: a deadline from `now`
    /// of `per_try(now, cap)`, to pass downstream.
    #[inline]
    pub const fn child(&self, now: Nanos, cap: Nanos) -> Deadline {
        Deadline::new(now, self.per_try(now, cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_never_exceeds_total() {
        let d = Deadline::new(Nanos(100), Nanos(50));
        assert_eq!(d.remaining(Nanos(0)), Nanos(50)); // clock before start
        assert_eq!(d.remaining(Nanos(120)), Nanos(30));
        assert_eq!(d.remaining(Nanos(150)), Nanos::ZERO);
        assert!(d.expired(Nanos(150)));
        assert!(!d.expired(Nanos(149)));
        assert_eq!(d.elapsed(Nanos(0)), Nanos::ZERO);
        assert_eq!(d.ends_at(), Nanos(150));
    }

    #[test]
    fn extremes_saturate() {
        let d = Deadline::new(Nanos::MAX, Nanos::MAX);
        assert_eq!(d.ends_at(), Nanos::MAX);
        assert_eq!(d.remaining(Nanos::ZERO), Nanos::MAX);
        assert_eq!(d.per_try(Nanos::ZERO, Nanos(5)), Nanos(5));
        let z = Deadline::new(Nanos(0), Nanos(0));
        assert!(z.expired(Nanos(0)));
        assert!(!z.can_start_attempt(Nanos(0), Nanos(0), Nanos(0)));
    }

    #[test]
    fn attempt_rule() {
        let d = Deadline::new(Nanos(0), Nanos(100));
        assert!(d.can_start_attempt(Nanos(0), Nanos(50), Nanos(50)));
        assert!(!d.can_start_attempt(Nanos(0), Nanos(51), Nanos(50)));
        assert!(!d.can_start_attempt(Nanos(0), Nanos(100), Nanos(0)));
        assert!(d.can_start_attempt(Nanos(0), Nanos(99), Nanos(0)));
        let c = d.child(Nanos(30), Nanos(200));
        assert_eq!((c.start(), c.total()), (Nanos(30), Nanos(70)));
    }
}
