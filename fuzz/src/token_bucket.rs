//! Token bucket (GCRA): single-owner vs an exact rational model vs the shared form.
//!
//! The model keeps the theoretical arrival time in units of `1/k` ns where `per/rate =
//! t/k` in lowest terms, so every decision is an exact integer comparison
//! (`max(TAT, now) + cost·t − now ≤ burst·t`). Checked on every operation:
//! - verdict, `remaining`, `retry_after`, `reset_after` equal the model's;
//! - `retry_after` is tight: the same cost fits at `now + retry_after` and not one ns before;
//! - `remaining` is tight: `remaining` fits now, `remaining + 1` does not;
//! - `reset_after` is tight: `remaining` grows at `now + reset_after`, not one ns before;
//! - a clock read earlier than the latest seen never shows more tokens than the latest;
//! - reconfiguration carries the tokens in use (rounded up, capped at the new burst);
//! - the shared form returns identical decisions while every instant is within its
//!   documented horizon, and never panics beyond it;
//! - the lean path (`check`, `try_acquire`) of both forms, run on copies fed the same
//!   operations, gives `acquire`'s verdicts and figures (`Granted` / `Denied`) and leaves
//!   the same state, everywhere (beyond the horizon too: the shared copies are compared
//!   with the shared `acquire`);
//! - `SharedTokenBucket::acquire_batch` over each run of acquisitions (between refunds and
//!   reconfigurations) on another copy gives the shared `acquire`'s verdicts, `remaining`,
//!   `retry_after` and errors, and leaves the same state word.

use crate::batch::{Pending, flush_shared};
use crate::num::{N, Tick};
use arbitrary::Arbitrary;
use weir_core::{
    BatchDecision, Decision, Denied, Granted, InsufficientCapacity, Nanos, SharedTokenBucket,
    TokenBucket, TokenBucketConfig, Verdict,
};

/// Runs the pending acquisitions through `acquire_batch` on `batch` and checks each outcome
/// and the final word against the shared `acquire`'s (`shared`, already past them).
fn flush_batch(batch: &SharedTokenBucket, pending: &mut Vec<Pending>, shared: &SharedTokenBucket) {
    flush_shared(
        pending,
        "token bucket",
        batch,
        shared,
        SharedTokenBucket::raw_state,
    );
}

/// A configuration and an operation sequence.
#[derive(Debug, Arbitrary)]
pub struct Input {
    rate: N,
    per: N,
    burst: N,
    ops: Vec<Op>,
}

/// One operation.
#[derive(Debug, Arbitrary)]
pub enum Op {
    /// Acquire a cost at the current instant.
    Acquire(N),
    /// Peek a cost.
    Peek(N),
    /// Refund tokens.
    Refund(N),
    /// Move the clock.
    Clock(Tick),
    /// Change the parameters, keeping the state.
    Reconfigure {
        /// New rate.
        rate: N,
        /// New period.
        per: N,
        /// New burst.
        burst: N,
    },
}

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The exact rational GCRA.
#[derive(Debug, Clone)]
struct Model {
    burst: u64,
    /// units per ns
    k: u128,
    /// units per token
    t: u128,
    /// burst · t
    w: u128,
    /// TAT in units (0 = full at every instant)
    tat: u128,
}

impl Model {
    fn new(rate: u64, per: u64, burst: u64) -> Model {
        let g = gcd(per, rate);
        let (k, t) = (u128::from(rate / g), u128::from(per / g));
        Model {
            burst,
            k,
            t,
            w: u128::from(burst) * t,
            tat: 0,
        }
    }
    fn now_u(&self, now: u64) -> u128 {
        u128::from(now) * self.k
    }
    fn ahead(&self, now: u64) -> u128 {
        self.tat.saturating_sub(self.now_u(now))
    }
    fn ns_ceil(&self, units: u128) -> Nanos {
        Nanos(u64::try_from(units.div_ceil(self.k)).unwrap_or(u64::MAX))
    }
    /// remaining and reset_after when the TAT is `ahead` units after now.
    fn levels(&self, ahead: u128) -> (u64, Nanos) {
        if ahead == 0 {
            return (self.burst, Nanos::ZERO);
        }
        if ahead <= self.w {
            let q = (self.w - ahead) / self.t;
            // `remaining` grows when ahead falls to w − (q+1)·t
            (q as u64, self.ns_ceil(ahead - (self.w - (q + 1) * self.t)))
        } else {
            (0, self.ns_ceil(ahead - self.w + self.t))
        }
    }
    fn decide(
        &self,
        now: u64,
        cost: u64,
    ) -> (Result<Decision, InsufficientCapacity>, Option<u128>) {
        if cost > self.burst {
            let e = InsufficientCapacity {
                cost,
                capacity: self.burst,
            };
            return (Err(e), None);
        }
        let ahead = self.ahead(now);
        let need = u128::from(cost) * self.t;
        if ahead + need <= self.w {
            let (remaining, reset_after) = self.levels(ahead + need);
            let d = Decision {
                verdict: Verdict::Admit,
                remaining,
                retry_after: Nanos::ZERO,
                reset_after,
            };
            let tat = (cost != 0).then(|| self.now_u(now) + ahead + need);
            (Ok(d), tat)
        } else {
            let (remaining, reset_after) = self.levels(ahead);
            let d = Decision {
                verdict: Verdict::Reject,
                remaining,
                retry_after: self.ns_ceil(ahead + need - self.w),
                reset_after,
            };
            (Ok(d), None)
        }
    }
    fn acquire(&mut self, now: u64, cost: u64) -> Result<Decision, InsufficientCapacity> {
        let (d, tat) = self.decide(now, cost);
        if let Some(tat) = tat {
            self.tat = tat;
        }
        d
    }
    fn refund(&mut self, now: u64, n: u64) {
        let ahead = self.ahead(now);
        if ahead != 0 {
            // The core saturates `n · t` at u64::MAX units; only differs from the exact
            // product when more than 2^64 units are in use, i.e. after a rewind far below
            // the TAT (and then the core gives back less: conservative).
            let back = (u128::from(n) * self.t).min(u128::from(u64::MAX));
            self.tat = self.now_u(now) + ahead.saturating_sub(back);
        }
    }
}

fn check_tight(tb: &TokenBucket, now: u64, cost: u64, d: &Decision) {
    let cap = tb.algorithm().burst();
    if d.verdict == Verdict::Reject {
        let r = d.retry_after.0;
        assert!(r > 0, "reject with zero retry_after: {d:?}");
        // (When the wait reaches the end of time, u64::MAX ns, it saturates: skip.)
        if let Some(at) = now.checked_add(r).filter(|&at| at < u64::MAX) {
            let later = tb.peek(Nanos(at), cost).unwrap();
            assert!(
                later.is_allowed(),
                "cost {cost} rejected at {now} with retry_after {r}, still rejected then: {later:?}"
            );
            let before = tb.peek(Nanos(at - 1), cost).unwrap();
            assert!(
                !before.is_allowed(),
                "retry_after {r} not tight: fits 1 ns earlier"
            );
        }
    } else {
        assert_eq!(d.retry_after, Nanos::ZERO);
    }
    // remaining is exact after this decision. (A bucket read from before its TAT by more
    // than the burst — a rewound clock — is in debt: it rejects even cost 0.)
    assert!(d.remaining <= cap);
    if d.remaining > 0 {
        assert!(tb.peek(Nanos(now), d.remaining).unwrap().is_allowed());
    }
    if d.remaining < cap {
        assert!(!tb.peek(Nanos(now), d.remaining + 1).unwrap().is_allowed());
    }
    // reset_after: zero iff full; remaining grows exactly then
    assert_eq!(
        d.reset_after.is_zero(),
        d.remaining == cap && tb.is_fresh(Nanos(now))
    );
    if !d.reset_after.is_zero()
        && let Some(at) = now.checked_add(d.reset_after.0).filter(|&at| at < u64::MAX)
    {
        let grown = tb.peek(Nanos(at), 0).unwrap().remaining;
        assert!(
            grown > d.remaining,
            "reset_after {:?} but remaining still {grown}",
            d.reset_after
        );
        let still = tb.peek(Nanos(at - 1), 0).unwrap().remaining;
        assert_eq!(
            still, d.remaining,
            "reset_after {:?} not tight",
            d.reset_after
        );
    }
}

/// The lean answer says what `acquire` said.
fn lean_agrees(
    cfg: &TokenBucketConfig,
    full: &Result<Decision, InsufficientCapacity>,
    lean: &Result<Granted, Denied>,
    what: &str,
) {
    match (full, lean) {
        (Ok(d), Ok(g)) => {
            assert_eq!(d.verdict, Verdict::Admit, "{what}");
            assert_eq!(g.decision(cfg), *d, "{what}");
            assert_eq!(g.remaining(cfg), d.remaining, "{what}");
            assert_eq!(g.reset_after(cfg), d.reset_after, "{what}");
        }
        (Ok(d), Err(Denied::RetryAfter(r))) => {
            assert_eq!(d.verdict, Verdict::Reject, "{what}");
            assert_eq!(*r, d.retry_after, "{what}");
        }
        (Err(e), Err(Denied::InsufficientCapacity(l))) => assert_eq!(e, l, "{what}"),
        _ => panic!("{what}: acquire {full:?} vs check {lean:?}"),
    }
}

/// Runs one input.
pub fn check(input: Input) {
    let Ok(mut tb) = TokenBucket::new(input.rate.0, Nanos(input.per.0), input.burst.0) else {
        assert!(SharedTokenBucket::new(input.rate.0, Nanos(input.per.0), input.burst.0).is_err());
        return;
    };
    let new_shared =
        || SharedTokenBucket::new(input.rate.0, Nanos(input.per.0), input.burst.0).unwrap();
    let mut shared = new_shared();
    let mut model = Model::new(input.rate.0, input.per.0, input.burst.0);
    // Copies driven through the lean path (`check`) and `try_acquire`.
    let (mut tb_check, mut tb_try) = (tb.clone(), tb.clone());
    let (mut sh_check, mut sh_try) = (new_shared(), new_shared());
    // A copy driven by `acquire_batch`, one call per run of acquisitions.
    let mut sh_batch = new_shared();
    let mut pending: Vec<Pending> = Vec::new();
    let mut horizon = shared.config().horizon().0;
    let (mut now, mut latest) = (0u64, 0u64);
    for op in input.ops.into_iter().take(256) {
        // The shared form is exact while every instant is within its horizon.
        let exact = latest <= horizon;
        match op {
            Op::Acquire(N(cost)) | Op::Peek(N(cost)) => {
                let acquire = matches!(op, Op::Acquire(_));
                let before = tb.clone();
                let (d, s) = if acquire {
                    (
                        tb.acquire(Nanos(now), cost),
                        shared.acquire(Nanos(now), cost),
                    )
                } else {
                    (tb.peek(Nanos(now), cost), shared.peek(Nanos(now), cost))
                };
                let m = if acquire {
                    model.acquire(now, cost)
                } else {
                    model.decide(now, cost).0
                };
                assert_eq!(d, m, "single-owner vs model at {now}, cost {cost}");
                if acquire {
                    let at = Nanos(now);
                    // The lean twins of a form that answered `$full`: the same answer
                    // through `check` and `try_acquire`, and the same state after.
                    macro_rules! lean_twins {
                        ($check:ident, $try:ident, $form:ident, $cfg:expr, $full:ident,
                         $state:ident, $what:literal) => {
                            let l = $check.check(at, cost);
                            lean_agrees($cfg, &$full, &l, $what);
                            let admitted = $full.is_ok_and(|d| d.is_allowed());
                            assert_eq!($try.try_acquire(at, cost), admitted);
                            assert_eq!($check.$state(), $form.$state());
                            assert_eq!($try.$state(), $form.$state());
                        };
                    }
                    lean_twins!(
                        tb_check,
                        tb_try,
                        tb,
                        tb.algorithm(),
                        d,
                        state,
                        "single-owner check"
                    );
                    lean_twins!(
                        sh_check,
                        sh_try,
                        shared,
                        shared.config(),
                        s,
                        raw_state,
                        "shared check"
                    );
                    pending.push((now, cost, s.map(BatchDecision::from)));
                }
                if exact {
                    assert_eq!(d, s, "shared vs single-owner at {now}, cost {cost}");
                }
                if let Ok(d) = d {
                    // The decision describes the bucket after the acquisition (a peek
                    // describes what an acquire would leave).
                    let mut after = before.clone();
                    let _ = after.acquire(Nanos(now), cost);
                    check_tight(&after, now, cost, &d);
                    if now < latest {
                        // a rewind never shows more tokens than the latest instant
                        let at_latest = before.peek(Nanos(latest), 0).unwrap().remaining;
                        let here = before.peek(Nanos(now), 0).unwrap().remaining;
                        assert!(
                            here <= at_latest,
                            "rewind to {now} shows {here} > {at_latest}"
                        );
                    }
                } else {
                    assert!(cost > tb.algorithm().burst());
                }
            }
            Op::Refund(N(n)) => {
                flush_batch(&sh_batch, &mut pending, &shared);
                sh_batch.refund(Nanos(now), n);
                tb.refund(Nanos(now), n);
                shared.refund(Nanos(now), n);
                tb_check.refund(Nanos(now), n);
                tb_try.refund(Nanos(now), n);
                sh_check.refund(Nanos(now), n);
                sh_try.refund(Nanos(now), n);
                model.refund(now, n);
                assert!(tb.peek(Nanos(now), 0).unwrap().remaining <= tb.algorithm().burst());
            }
            Op::Clock(tick) => {
                now = tick.apply(now);
                latest = latest.max(now);
            }
            Op::Reconfigure { rate, per, burst } => {
                flush_batch(&sh_batch, &mut pending, &shared);
                let old = tb.clone();
                let r = tb.reconfigure(Nanos(now), rate.0, Nanos(per.0), burst.0);
                let rs = shared.reconfigure(Nanos(now), rate.0, Nanos(per.0), burst.0);
                assert_eq!(r.is_ok(), rs.is_ok());
                if r.is_err() {
                    continue;
                }
                let (at, r, p, b) = (Nanos(now), rate.0, Nanos(per.0), burst.0);
                for copy in [&mut tb_check, &mut tb_try] {
                    copy.reconfigure(at, r, p, b).unwrap();
                }
                for copy in [&mut sh_check, &mut sh_try, &mut sh_batch] {
                    copy.reconfigure(at, r, p, b).unwrap();
                }
                // tokens in use carry over: ahead_new / t_new ∈ [used, used + 1 unit)
                let new = Model::new(rate.0, per.0, burst.0);
                let old_ahead = model.ahead(now).min(model.w);
                let new_ahead = tb.state().0.saturating_sub(new.now_u(now));
                let want = (old_ahead * new.t).min(new.w * model.t); // in units·units
                assert!(new_ahead <= new.w, "carried beyond an empty bucket");
                assert!(
                    new_ahead * model.t >= want,
                    "reconfigure lost tokens in use"
                );
                assert!(
                    new_ahead == 0 || (new_ahead - 1) * model.t < want,
                    "reconfigure rounded up by more than one unit ({old:?} → {tb:?})"
                );
                model = new;
                model.tat = tb.state().0;
                horizon = horizon.min(shared.config().horizon().0);
            }
        }
        if exact && latest <= horizon {
            assert_eq!(tb.is_fresh(Nanos(now)), shared.is_fresh(Nanos(now)));
        }
    }
    flush_batch(&sh_batch, &mut pending, &shared);
}
