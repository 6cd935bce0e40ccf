//! Leaky bucket (nginx `limit_req`): single-owner vs shared vs the step-by-step nginx model.
//!
//! Checked: single-owner and shared decide identically while instants stay within the
//! shared form's horizon; with a monotone clock the verdict (admit / delay `d` / reject)
//! and `remaining` equal nginx's algorithm in exact arithmetic, and idleness agrees; after
//! a rewind the bucket is never more lenient than nginx ("no time passed"); the times in
//! every decision are exact (see [`crate::times`]); no panic anywhere;
//! `SharedLeakyBucket::acquire_batch` over each run of acquisitions (cut at every peek) on
//! another copy gives the shared `acquire`'s verdicts, `remaining`, `retry_after`, `delay`
//! and errors, and leaves the same state word.

use crate::batch::{Pending, flush_shared};
use crate::num::N;
use crate::times::check_times;
use arbitrary::Arbitrary;
use weir_core::reference::NginxModel;
use weir_core::{BatchDecision, LeakyBucket, Nanos, SharedLeakyBucket, Verdict};

/// Runs the pending acquisitions through `acquire_batch` on `batch` and checks each outcome
/// and the final word against the shared `acquire`'s (`shared`, already past them).
fn flush_batch(batch: &SharedLeakyBucket, pending: &mut Vec<Pending>, shared: &SharedLeakyBucket) {
    flush_shared(
        pending,
        "leaky bucket",
        batch,
        shared,
        SharedLeakyBucket::raw_state,
    );
}

/// A configuration and an operation sequence.
#[derive(Debug, Arbitrary)]
pub struct Input {
    rate: N,
    per: N,
    burst: N,
    delay: N,
    nodelay: bool,
    ops: Vec<Op>,
}

/// One operation: acquire, peek, or move the clock.
pub use crate::num::CostOp as Op;

/// Runs one input.
pub fn check(input: Input) {
    let (rate, per, burst, delay) = (input.rate.0, input.per.0, input.burst.0, input.delay.0);
    let Ok(mut lb) = LeakyBucket::new(rate, Nanos(per), burst, delay, input.nodelay) else {
        assert!(SharedLeakyBucket::new(rate, Nanos(per), burst, delay, input.nodelay).is_err());
        return;
    };
    let sh = SharedLeakyBucket::new(rate, Nanos(per), burst, delay, input.nodelay).unwrap();
    let sh_batch = SharedLeakyBucket::new(rate, Nanos(per), burst, delay, input.nodelay).unwrap();
    let mut pending: Vec<Pending> = Vec::new();
    let horizon = sh.config().horizon().0;
    // The model works in u128 products of the parameters: keep it to moderate values.
    let mut small = rate < 1 << 40 && per < 1 << 40 && burst < 32;
    let mut m = NginxModel::new(rate, per, burst, delay, input.nodelay);
    let mut monotone = small;
    let (mut now, mut latest) = (0u64, 0u64);
    for op in input.ops.into_iter().take(256) {
        let (cost, acquire) = match op {
            Op::Clock(t) => {
                now = t.apply(now);
                monotone &= now >= latest;
                latest = latest.max(now);
                continue;
            }
            Op::Acquire(N(c)) => (c, true),
            Op::Peek(N(c)) => (c, false),
        };
        let exact = latest <= horizon;
        let before = lb.clone();
        let (d, s) = if acquire {
            (lb.acquire(Nanos(now), cost), sh.acquire(Nanos(now), cost))
        } else {
            flush_batch(&sh_batch, &mut pending, &sh);
            (lb.peek(Nanos(now), cost), sh.peek(Nanos(now), cost))
        };
        if acquire {
            pending.push((now, cost, s.map(BatchDecision::from)));
        }
        if exact {
            assert_eq!(d, s, "shared vs single-owner at {now}, cost {cost}");
        }
        let Ok(d) = d else {
            assert!(cost > burst.saturating_add(1));
            continue;
        };
        let mut after = before.clone();
        let _ = after.acquire(Nanos(now), cost);
        check_times(&before, &after, now, cost, &d);
        if let Verdict::Delay(w) = d.verdict {
            assert!(
                !w.is_zero() && !input.nodelay,
                "zero or nodelay delay: {d:?}"
            );
        }
        if cost == 0 {
            continue;
        }
        if !small {
            continue;
        }
        let mv = m.verdict(now, cost);
        if monotone {
            assert_eq!(d.verdict, mv, "verdict vs nginx at {now}, cost {cost}");
            if acquire {
                m.acquire(now, cost);
                assert_eq!(d.remaining, m.remaining(now), "remaining vs nginx at {now}");
                assert_eq!(lb.is_fresh(Nanos(now)), m.is_idle(now));
            }
        } else {
            // After a rewind nginx counts "no time passed"; we evaluate at the earlier
            // instant, which must never be more lenient. The model stops following here.
            if d.is_allowed() {
                assert_ne!(
                    mv,
                    Verdict::Reject,
                    "more lenient than nginx after a rewind"
                );
            }
            small = false;
        }
    }
    flush_batch(&sh_batch, &mut pending, &sh);
}
