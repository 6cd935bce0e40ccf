//! Checks shared by every rate limiter: the times in a decision are exact.

use weir_core::{Decision, Nanos, RateLimiter, Verdict};

/// `retry_after` is the exact wait (the cost is allowed at `now + retry_after` and not one
/// ns earlier, judged on the limiter `before` the call); `reset_after` is exact for
/// `remaining` growing (on the limiter `after` the call); a rejection says to wait.
/// Instants that would reach `u64::MAX` (the end of time, where waits saturate) are skipped.
pub fn check_times<L: RateLimiter>(before: &L, after: &L, now: u64, cost: u64, d: &Decision) {
    if d.verdict == Verdict::Reject {
        assert!(d.retry_after.0 > 0, "rejected with retry_after 0: {d:?}");
        let t = now.saturating_add(d.retry_after.0);
        if t < u64::MAX {
            assert!(
                before.peek(Nanos(t), cost).unwrap().is_allowed(),
                "cost {cost} at {now}: not allowed at now + retry_after ({d:?})"
            );
            assert!(
                !before.peek(Nanos(t - 1), cost).unwrap().is_allowed(),
                "cost {cost} at {now}: retry_after not tight ({d:?})"
            );
        }
    } else {
        assert_eq!(d.retry_after, Nanos::ZERO);
    }
    let r0 = after.peek(Nanos(now), 0).unwrap().remaining;
    assert!(r0 <= after.capacity());
    if d.reset_after.0 > 0 {
        let t = now.saturating_add(d.reset_after.0);
        if t < u64::MAX {
            let grown = after.peek(Nanos(t), 0).unwrap().remaining;
            assert!(
                grown > r0,
                "at {now}: remaining {r0} not grown at reset_after ({d:?})"
            );
            let still = after.peek(Nanos(t - 1), 0).unwrap().remaining;
            assert!(still <= r0, "at {now}: reset_after not tight ({d:?})");
        }
    }
}
