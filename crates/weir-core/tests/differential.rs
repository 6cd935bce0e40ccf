//! Property / differential tests of every limiter against the reference models in
//! `weir_core::reference`, plus invariants that hold for all of them: no panic, the
//! `retry_after` / `reset_after` they report are exact (minimal), shared == single-owner.
//!
//! Not under miri: proptest's machinery in the interpreter takes minutes per case. Miri runs
//! the unit and doc tests, which exercise every primitive (see docs/VERIFICATION.md).
#![cfg(not(miri))]

use proptest::prelude::*;
use weir_core::reference::{
    FixedWindowModel, NginxModel, RationalGcra, SlidingCounterModel, SlidingLogModel,
};
use weir_core::{
    BatchAcquire, BatchDecision, Decision, Denied, FixedWindow, Granted, InsufficientCapacity,
    LeakyBucket, Nanos, RateLimiter, SharedFixedWindow, SharedLeakyBucket, SharedSlidingWindow,
    SharedTokenBucket, SlidingLog, SlidingWindow, TokenBucket, TokenBucketConfig, Verdict,
};

#[path = "../src/test_support.rs"]
mod test_support;

use test_support::assert_batch_matches;

const S: u64 = 1_000_000_000;

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Rewind(u64),
    Jump(u64),
    Acquire(u64),
    Peek(u64),
    Refund(u64),
    Reconfigure(u64, u64, u64),
}

fn time_step(per: u64) -> impl Strategy<Value = u64> {
    prop_oneof![0..4u64, 0..per, 0..per * 3]
}

fn ops(per: u64, max_cost: u64, extremes: bool) -> impl Strategy<Value = Vec<Op>> {
    let jump = if extremes {
        prop_oneof![Just(0u64), Just(u64::MAX), Just(u64::MAX / 2), any::<u64>()].boxed()
    } else {
        (0..per * 20).boxed()
    };
    let op = prop_oneof![
        4 => time_step(per).prop_map(Op::Advance),
        1 => time_step(per).prop_map(Op::Rewind),
        1 => jump.prop_map(Op::Jump),
        6 => (0..=max_cost + 1).prop_map(Op::Acquire),
        1 => (0..=max_cost + 1).prop_map(Op::Peek),
        1 => (0..=max_cost).prop_map(Op::Refund),
        1 => (1..6u64, prop_oneof![Just(S), 1..2 * S], 1..6u64)
            .prop_map(|(r, p, b)| Op::Reconfigure(r, p, b)),
    ];
    prop::collection::vec(op, 1..80)
}

fn apply_time(now: u64, op: &Op) -> u64 {
    match *op {
        Op::Advance(d) => now.saturating_add(d),
        Op::Rewind(d) => now.saturating_sub(d),
        Op::Jump(t) => t,
        _ => now,
    }
}

/// `retry_after` is the exact wait: at `now + retry_after` the cost fits, one ns earlier
/// it does not. `reset_after` likewise for `remaining` growing.
fn check_times<L: RateLimiter>(l: &L, now: u64, cost: u64, d: &Decision, before: &L) {
    if d.verdict == Verdict::Reject {
        let t = now.saturating_add(d.retry_after.0);
        if t < u64::MAX {
            assert!(
                before.peek(Nanos(t), cost).unwrap().is_allowed(),
                "not admitted at now + retry_after: {d:?}"
            );
        }
        if d.retry_after.0 > 0 && t < u64::MAX {
            assert!(!before.peek(Nanos(t - 1), cost).unwrap().is_allowed());
        }
    }
    let r0 = l.peek(Nanos(now), 0).unwrap().remaining;
    if d.reset_after.0 > 0 {
        let t = now.saturating_add(d.reset_after.0);
        if t < u64::MAX {
            assert!(l.peek(Nanos(t), 0).unwrap().remaining > r0, "{d:?}");
            assert!(l.peek(Nanos(t - 1), 0).unwrap().remaining <= r0, "{d:?}");
        }
    }
}

fn tb_params() -> impl Strategy<Value = (u64, u64, u64)> {
    (
        prop_oneof![1..10u64, Just(3), Just(1_000_000_007)],
        prop_oneof![Just(S), 1..3 * S, 1..1000u64],
        1..8u64,
    )
}

/// Token-bucket parameters up to the `u64` extremes (configurations beyond the window
/// bound are rejected by `new` and skipped).
fn tb_params_extreme() -> impl Strategy<Value = (u64, u64, u64)> {
    (
        prop_oneof![
            1..10u64,
            Just(3),
            Just(1_000_000_007),
            Just(u64::MAX),
            any::<u64>()
        ],
        prop_oneof![Just(S), 1..3 * S, 1..1000u64, Just(u64::MAX), any::<u64>()],
        prop_oneof![1..8u64, Just(1u64 << 20), any::<u64>()],
    )
}

/// A batch trace: time moves and cost codes 0..=9 (see [`trace_events`]).
fn batch_trace(per: u64) -> impl Strategy<Value = Vec<(Op, u64)>> {
    prop::collection::vec(
        (
            prop_oneof![
                4 => time_step(per).prop_map(Op::Advance),
                1 => time_step(per).prop_map(Op::Rewind),
                1 => prop_oneof![Just(0u64), Just(u64::MAX), Just(u64::MAX / 2), any::<u64>()]
                    .prop_map(Op::Jump)
            ],
            0..=9u64,
        ),
        0..700,
    )
}

/// The events of a batch trace from `now`: cost codes 0..=9 scaled onto 0 ..= cap + 1 at
/// both ends.
fn trace_events(mut now: u64, cap: u64, trace: &[(Op, u64)]) -> Vec<(u64, u64)> {
    let cost = |c: u64| match c {
        8 => cap,
        9 => cap.saturating_add(1),
        c => c.min(cap),
    };
    trace
        .iter()
        .map(|(op, c)| {
            now = apply_time(now, op);
            (now, cost(*c))
        })
        .collect()
}

/// Window parameters up to the extremes (limits above `max` are rejected and skipped).
fn window_params(max: u64) -> impl Strategy<Value = (u64, u64)> {
    (
        prop_oneof![1..10u64, Just(5000), Just(max), 1..=max],
        prop_oneof![Just(S), 1..3 * S, 1..1000u64, Just(u64::MAX), any::<u64>()],
    )
}

/// A shared limiter's `acquire_batch` over `trace` (after `pre` on both twins), in calls
/// of the lengths `calls` (cycled), == per-event `acquire` on the twin, outcome for
/// outcome and in the word after each call.
fn shared_batch_agrees<L: BatchAcquire + weir_core::SharedRateLimiter>(
    batch: &L,
    each: &L,
    cap: u64,
    pre: &[Op],
    trace: &[(Op, u64)],
    calls: &[usize],
    raw: impl Fn(&L) -> u64,
) -> Result<(), TestCaseError> {
    let mut now = 0u64;
    for op in pre {
        now = apply_time(now, op);
        if let Op::Acquire(c) = *op {
            prop_assert_eq!(batch.acquire(Nanos(now), c), each.acquire(Nanos(now), c));
        }
    }
    in_calls(&trace_events(now, cap, trace), calls, |part| {
        assert_batch_matches(
            part,
            |n, event, write| batch.acquire_batch(n, event, write),
            |t, c| each.acquire(t, c),
        );
        prop_assert_eq!(raw(batch), raw(each));
        Ok(())
    })
}

/// A shared limiter's [`shared_batch_agrees`] against a twin, both from `make`, on
/// `(pre, trace, calls)` ([`batch_inputs`]); nothing to check when `make` refuses.
fn twins_batch_agree<L: BatchAcquire + weir_core::SharedRateLimiter, E>(
    make: impl Fn() -> Result<L, E>,
    cap: u64,
    (pre, trace, calls): &(Vec<Op>, Vec<(Op, u64)>, Vec<usize>),
    raw: impl Fn(&L) -> u64,
) -> Result<(), TestCaseError> {
    let (Ok(batch), Ok(each)) = (make(), make()) else {
        return Ok(());
    };
    shared_batch_agrees(&batch, &each, cap, pre, trace, calls, raw)
}

/// A batch test's inputs: the ops before (costs up to `max_cost`), the trace, and the
/// lengths of the `acquire_batch` calls.
fn batch_inputs(max_cost: u64) -> impl Strategy<Value = (Vec<Op>, Vec<(Op, u64)>, Vec<usize>)> {
    (
        ops(S, max_cost, true),
        batch_trace(S),
        prop::collection::vec(1..300usize, 1..8),
    )
}

/// `f` on consecutive parts of `events` of the lengths `calls` (cycled) until none is left.
fn in_calls(
    events: &[(u64, u64)],
    calls: &[usize],
    mut f: impl FnMut(&[(u64, u64)]) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let mut rest = events;
    for &n in calls.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (part, tail) = rest.split_at(n.min(rest.len()));
        rest = tail;
        f(part)?;
    }
    Ok(())
}

/// The lean path's answer says what `acquire`'s does: same verdict, `Granted` rebuilds the
/// admitted decision exactly, `Denied` carries the same `retry_after` or the same error.
fn lean_agrees(
    cfg: &TokenBucketConfig,
    full: Result<Decision, InsufficientCapacity>,
    lean: Result<Granted, Denied>,
) -> Result<(), TestCaseError> {
    match (full, lean) {
        (Ok(d), Ok(g)) => {
            prop_assert_eq!(d.verdict, Verdict::Admit);
            prop_assert_eq!(g.decision(cfg), d);
            prop_assert_eq!(g.remaining(cfg), d.remaining);
            prop_assert_eq!(g.reset_after(cfg), d.reset_after);
        }
        (Ok(d), Err(Denied::RetryAfter(r))) => {
            prop_assert_eq!(d.verdict, Verdict::Reject);
            prop_assert_eq!(r, d.retry_after);
        }
        (Err(e), Err(Denied::InsufficientCapacity(l))) => prop_assert_eq!(e, l),
        (full, lean) => prop_assert!(false, "acquire {:?} vs check {:?}", full, lean),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The lean single-owner path (`check`, `try_acquire`) == `acquire` == the rational
    /// model, on any sequence incl. clock rewinds, u64 instants and u64 parameters: same
    /// verdicts, same state after every step (so it never over-admits where `acquire`
    /// does not), and `Granted` / `Denied` carry `acquire`'s figures exactly.
    #[test]
    fn token_bucket_lean_equals_acquire((rate, per, burst) in tb_params_extreme(), ops in ops(S, 8, true)) {
        let Ok(mut full) = TokenBucket::new(rate, Nanos(per), burst) else { return Ok(()); };
        let (mut lean, mut boolean) = (full.clone(), full.clone());
        // The model's u128 products (not in lowest terms) stay in range for these.
        let mut m = (rate < 1 << 31 && per < 1 << 34 && burst < 1 << 20)
            .then(|| RationalGcra::new(rate, per, burst));
        let mut now = 0u64;
        for op in &ops {
            now = apply_time(now, op);
            match *op {
                Op::Acquire(c) | Op::Peek(c) => {
                    // Peek ops: probe the cost range edge (above the burst) too.
                    let c = if matches!(op, Op::Peek(_)) { c.saturating_mul(burst) } else { c };
                    let d = full.acquire(Nanos(now), c);
                    if let Some(m) = m.as_mut() {
                        prop_assert_eq!(d, m.acquire(now, c));
                    }
                    let l = lean.check(Nanos(now), c);
                    lean_agrees(full.algorithm(), d, l)?;
                    prop_assert_eq!(boolean.try_acquire(Nanos(now), c), d.is_ok_and(|d| d.is_allowed()));
                    prop_assert_eq!(lean.state(), full.state());
                    prop_assert_eq!(boolean.state(), full.state());
                }
                Op::Refund(n) => {
                    full.refund(Nanos(now), n);
                    lean.refund(Nanos(now), n);
                    boolean.refund(Nanos(now), n);
                    if let Some(m) = m.as_mut() {
                        m.refund(now, n);
                    }
                }
                Op::Reconfigure(r, p, b) => {
                    for tb in [&mut full, &mut lean, &mut boolean] {
                        tb.reconfigure(Nanos(now), r, Nanos(p), b).unwrap();
                    }
                    if let Some(m) = m.as_mut() {
                        m.reconfigure(now, r, p, b);
                    }
                }
                _ => {}
            }
        }
    }

    /// `SharedTokenBucket::acquire_batch` == per-event shared `acquire`, bit for bit (the
    /// verdict, `remaining`, `retry_after`, the insufficient-capacity error and the final
    /// state word), on any trace: clock rewinds, u64 instants, costs 0 ..= burst + 1, u64
    /// parameters, any starting state (a refund or a jump beyond the horizon first), traces
    /// longer than one batch.
    #[test]
    fn token_bucket_batch_equals_acquire(
        (rate, per, burst) in tb_params_extreme(),
        pre in ops(S, 8, true),
        trace in batch_trace(S),
    ) {
        let Ok(batch) = SharedTokenBucket::new(rate, Nanos(per), burst) else { return Ok(()); };
        let each = SharedTokenBucket::new(rate, Nanos(per), burst).unwrap();
        let mut now = 0u64;
        for op in &pre {
            now = apply_time(now, op);
            if let Op::Acquire(c) = *op {
                let _ = batch.acquire(Nanos(now), c);
                let _ = each.acquire(Nanos(now), c);
            }
        }
        // Costs 0..=9 scaled onto 0 ..= burst + 1 at both ends; one call for the whole trace.
        assert_batch_matches(
            &trace_events(now, burst, &trace),
            |n, event, write| batch.acquire_batch(n, event, write),
            |t, c| each.acquire(t, c),
        );
        prop_assert_eq!(batch.raw_state(), each.raw_state());
    }

    /// `SharedLeakyBucket::acquire_batch` == per-event shared `acquire`, bit for bit
    /// (verdict, `remaining`, `retry_after`, `delay`, errors, the final word), on any
    /// trace and configuration (delay, nodelay, burst 0, u64 extremes), in calls of any
    /// length.
    #[test]
    fn leaky_bucket_batch_equals_acquire(
        (rate, per, burst) in tb_params_extreme(),
        (delay, nodelay) in (prop_oneof![0..4u64, any::<u64>()], any::<bool>()),
        inputs in batch_inputs(8),
    ) {
        let burst = burst.saturating_sub(1);
        let make = || SharedLeakyBucket::new(rate, Nanos(per), burst, delay, nodelay);
        twins_batch_agree(make, burst.saturating_add(1), &inputs, |l| l.raw_state())?;
    }

    /// `SharedFixedWindow::acquire_batch` == per-event shared `acquire`, bit for bit.
    #[test]
    fn fixed_window_batch_equals_acquire(
        (limit, window) in window_params(weir_core::window::MAX_FIXED_LIMIT),
        inputs in batch_inputs(8),
    ) {
        let make = || SharedFixedWindow::new(limit, Nanos(window));
        twins_batch_agree(make, limit, &inputs, |l| l.raw_state())?;
    }

    /// `SharedSlidingWindow::acquire_batch` (the decoded fast path included) == per-event
    /// shared `acquire`, bit for bit.
    #[test]
    fn sliding_window_batch_equals_acquire(
        (limit, window) in window_params(weir_core::window::MAX_SLIDING_LIMIT),
        inputs in batch_inputs(8),
    ) {
        let make = || SharedSlidingWindow::new(limit, Nanos(window));
        twins_batch_agree(make, limit, &inputs, |l| l.raw_state())?;
    }

    /// `SlidingLog::acquire_batch` == per-event `acquire`: outcomes, and the state (its
    /// length and its answers at several instants).
    #[test]
    fn sliding_log_batch_equals_acquire(
        limit in 1..=16u64,
        window in prop_oneof![1..50u64, Just(S), Just(u64::MAX), any::<u64>()],
        (pre, trace, calls) in batch_inputs(16),
    ) {
        let mut batch = SlidingLog::<16>::new(limit, Nanos(window)).unwrap();
        let mut now = 0u64;
        for op in &pre {
            now = apply_time(now, op);
            if let Op::Acquire(c) = *op {
                let _ = batch.acquire(Nanos(now), c);
            }
        }
        let mut each = batch.clone();
        in_calls(&trace_events(now, limit, &trace), &calls, |part| {
            assert_batch_matches(
                part,
                |n, event, write| batch.acquire_batch(n, event, write),
                |t, c| each.acquire(t, c),
            );
            prop_assert_eq!(batch.state().len(), each.state().len());
            for t in [0, now, u64::MAX] {
                prop_assert_eq!(batch.peek(Nanos(t), 1), each.peek(Nanos(t), 1));
            }
            Ok(())
        })?;
    }

    /// The lean shared path == the shared `acquire`, bit for bit (verdicts, figures and the
    /// state word), on any sequence, within the horizon or beyond it; and == the
    /// single-owner form while every instant is within the horizon.
    #[test]
    fn shared_token_bucket_lean_equals_acquire((rate, per, burst) in tb_params_extreme(), ops in ops(S, 8, true)) {
        let Ok(full) = SharedTokenBucket::new(rate, Nanos(per), burst) else { return Ok(()); };
        let (lean, boolean) = (SharedTokenBucket::new(rate, Nanos(per), burst).unwrap(), SharedTokenBucket::new(rate, Nanos(per), burst).unwrap());
        let mut single = TokenBucket::new(rate, Nanos(per), burst).unwrap();
        let horizon = full.config().horizon().0;
        let (mut now, mut latest) = (0u64, 0u64);
        for op in &ops {
            now = apply_time(now, op);
            latest = latest.max(now);
            match *op {
                Op::Acquire(c) | Op::Peek(c) => {
                    let c = if matches!(op, Op::Peek(_)) { c.saturating_mul(burst) } else { c };
                    let d = full.acquire(Nanos(now), c);
                    let l = lean.check(Nanos(now), c);
                    lean_agrees(full.config(), d, l)?;
                    prop_assert_eq!(boolean.try_acquire(Nanos(now), c), d.is_ok_and(|d| d.is_allowed()));
                    prop_assert_eq!(lean.raw_state(), full.raw_state());
                    prop_assert_eq!(boolean.raw_state(), full.raw_state());
                    let s = single.check(Nanos(now), c);
                    if latest <= horizon {
                        prop_assert_eq!(s, l);
                    }
                }
                Op::Refund(n) => {
                    for b in [&full, &lean, &boolean] {
                        b.refund(Nanos(now), n);
                    }
                    single.refund(Nanos(now), n);
                }
                // Reconfiguration is covered by the acquire tests (same state word).
                _ => {}
            }
        }
    }

    /// Single-owner token bucket == exact rational GCRA, on any sequence incl. u64 extremes.
    #[test]
    fn token_bucket_equals_rational_model((rate, per, burst) in tb_params(), ops in ops(S, 8, true)) {
        let mut tb = TokenBucket::new(rate, Nanos(per), burst).unwrap();
        let mut m = RationalGcra::new(rate, per, burst);
        let mut now = 0u64;
        for op in &ops {
            now = apply_time(now, op);
            match *op {
                Op::Acquire(c) => {
                    let before = tb.clone();
                    let d = tb.acquire(Nanos(now), c);
                    prop_assert_eq!(d, m.acquire(now, c));
                    if let Ok(d) = d { check_times(&tb, now, c, &d, &before); }
                }
                Op::Peek(c) => prop_assert_eq!(tb.peek(Nanos(now), c), m.peek(now, c)),
                Op::Refund(n) => { tb.refund(Nanos(now), n); m.refund(now, n); }
                Op::Reconfigure(r, p, b) => {
                    tb.reconfigure(Nanos(now), r, Nanos(p), b).unwrap();
                    m.reconfigure(now, r, p, b);
                }
                _ => {}
            }
            prop_assert_eq!(tb.is_fresh(Nanos(now)), m.peek(now, 0).unwrap().reset_after.is_zero());
        }
    }

    /// Shared token bucket == single-owner within the horizon (times below 2^40 ns here).
    #[test]
    fn shared_token_bucket_equals_single((rate, per, burst) in tb_params(), ops in ops(S, 8, false)) {
        let mut tb = TokenBucket::new(rate, Nanos(per), burst).unwrap();
        let mut sh = SharedTokenBucket::new(rate, Nanos(per), burst).unwrap();
        let mut now = 0u64;
        for op in &ops {
            now = apply_time(now, op);
            prop_assume!(now < tb.algorithm().horizon().0);
            match *op {
                Op::Acquire(c) => prop_assert_eq!(tb.acquire(Nanos(now), c), sh.acquire(Nanos(now), c)),
                Op::Peek(c) => prop_assert_eq!(tb.peek(Nanos(now), c), sh.peek(Nanos(now), c)),
                Op::Refund(n) => { tb.refund(Nanos(now), n); sh.refund(Nanos(now), n); }
                Op::Reconfigure(r, p, b) => {
                    tb.reconfigure(Nanos(now), r, Nanos(p), b).unwrap();
                    sh.reconfigure(Nanos(now), r, Nanos(p), b).unwrap();
                }
                _ => {}
            }
            prop_assert_eq!(tb.is_fresh(Nanos(now)), sh.is_fresh(Nanos(now)));
        }
    }

    /// Never over-admit: over any run from full, admitted ≤ burst + rate·elapsed/per.
    #[test]
    fn token_bucket_never_over_admits((rate, per, burst) in tb_params(), steps in prop::collection::vec((0..S, 1..4u64), 1..100)) {
        let mut tb = TokenBucket::new(rate, Nanos(per), burst).unwrap();
        let (mut now, mut admitted) = (0u64, 0u128);
        for (dt, c) in steps {
            now += dt;
            if let Ok(d) = tb.acquire(Nanos(now), c) && d.is_allowed() {
                admitted += c as u128;
            }
            prop_assert!(admitted * per as u128 <= burst as u128 * per as u128 + rate as u128 * now as u128);
        }
    }

    /// Leaky bucket == nginx model (verdict incl. delay, remaining, idle) for monotone time;
    /// with rewinds it is never more lenient; shared == single-owner.
    #[test]
    fn leaky_bucket_equals_nginx(
        rate in 1..6u64, per in prop_oneof![Just(S), 1..2 * S], burst in 0..5u64, delay in 0..6u64,
        nodelay in any::<bool>(), ops in ops(S, 6, false),
    ) {
        let mut lb = LeakyBucket::new(rate, Nanos(per), burst, delay, nodelay).unwrap();
        let sh = SharedLeakyBucket::new(rate, Nanos(per), burst, delay, nodelay).unwrap();
        let mut m = NginxModel::new(rate, per, burst, delay, nodelay);
        let mut now = 0u64;
        let mut monotone = true;
        for op in &ops {
            let next = apply_time(now, op);
            monotone &= next >= now || m.last.is_none_or(|l| next >= l);
            now = next;
            if let Op::Acquire(c) = *op {
                let before = lb.clone();
                let d = lb.acquire(Nanos(now), c);
                prop_assert_eq!(d, sh.acquire(Nanos(now), c));
                let Ok(d) = d else { prop_assert!(c > burst + 1); continue };
                check_times(&lb, now, c, &d, &before);
                if c == 0 { continue; }
                let mv = m.verdict(now, c);
                if monotone {
                    prop_assert_eq!(d.verdict, mv);
                    m.acquire(now, c);
                    prop_assert_eq!(d.remaining, m.remaining(now));
                } else {
                    // Conservative: if we accept, nginx accepts too.
                    if d.is_allowed() { prop_assert!(mv != Verdict::Reject); }
                    break;
                }
            }
            if monotone {
                prop_assert_eq!(lb.is_fresh(Nanos(now)), m.is_idle(now));
            }
        }
    }

    /// Fixed window == model; shared == single-owner; never more than `limit` per window.
    #[test]
    fn fixed_window_equals_model(limit in 1..6u64, window in prop_oneof![Just(S), 1..1000u64], ops in ops(S, 6, false)) {
        let mut fw = FixedWindow::new(limit, Nanos(window)).unwrap();
        let sh = SharedFixedWindow::new(limit, Nanos(window)).unwrap();
        let mut m = FixedWindowModel::new(limit, window);
        let mut now = 0u64;
        for op in &ops {
            now = apply_time(now, op);
            if let Op::Acquire(c) = *op {
                let before = fw.clone();
                let d = fw.acquire(Nanos(now), c);
                prop_assert_eq!(d, sh.acquire(Nanos(now), c));
                let Ok(d) = d else { prop_assert!(c > limit); continue };
                prop_assert_eq!(d, m.acquire(now, c));
                check_times(&fw, now, c, &d, &before);
            }
        }
    }

    /// Sliding-window counter == model (verdict, remaining); shared == single-owner; exact
    /// retry/reset times.
    #[test]
    fn sliding_window_equals_model(limit in 1..8u64, window in prop_oneof![Just(S), 1..1000u64], ops in ops(S, 8, false)) {
        let mut sw = SlidingWindow::new(limit, Nanos(window)).unwrap();
        let sh = SharedSlidingWindow::new(limit, Nanos(window)).unwrap();
        let mut m = SlidingCounterModel::new(limit, window);
        let mut now = 0u64;
        for op in &ops {
            now = apply_time(now, op);
            if let Op::Acquire(c) = *op {
                let before = sw.clone();
                let d = sw.acquire(Nanos(now), c);
                prop_assert_eq!(d, sh.acquire(Nanos(now), c));
                let Ok(d) = d else { prop_assert!(c > limit); continue };
                prop_assert_eq!((d.verdict, d.remaining), m.acquire(now, c));
                check_times(&sw, now, c, &d, &before);
            }
        }
    }

    /// Beyond the packed windows' horizon (u64 extremes): no panic, shared == single-owner,
    /// and every reported time is still exact for the state the limiter holds.
    #[test]
    fn windows_at_extremes(limit in 1..8u64, window in prop_oneof![Just(S), 1..1000u64, Just(u64::MAX)], ops in ops(S, 8, true)) {
        let mut fw = FixedWindow::new(limit, Nanos(window)).unwrap();
        let fsh = SharedFixedWindow::new(limit, Nanos(window)).unwrap();
        let mut sw = SlidingWindow::new(limit, Nanos(window)).unwrap();
        let ssh = SharedSlidingWindow::new(limit, Nanos(window)).unwrap();
        let mut now = 0u64;
        for op in &ops {
            now = apply_time(now, op);
            if let Op::Acquire(c) = *op {
                let (bf, bs) = (fw.clone(), sw.clone());
                let d = fw.acquire(Nanos(now), c);
                prop_assert_eq!(d, fsh.acquire(Nanos(now), c));
                if let Ok(d) = d { check_times(&fw, now, c, &d, &bf); }
                let d = sw.acquire(Nanos(now), c);
                prop_assert_eq!(d, ssh.acquire(Nanos(now), c));
                if let Ok(d) = d { check_times(&sw, now, c, &d, &bs); }
            }
        }
    }

    /// Sliding log == naive event list; exact retry/reset times.
    #[test]
    fn sliding_log_equals_model(limit in 1..8u64, window in prop_oneof![Just(S), 1..1000u64], ops in ops(S, 8, true)) {
        let mut log = SlidingLog::<8>::new(limit, Nanos(window)).unwrap();
        let mut m = SlidingLogModel::new(limit, window);
        let mut now = 0u64;
        for op in &ops {
            now = apply_time(now, op);
            if let Op::Acquire(c) = *op {
                let before = log.clone();
                let d = log.acquire(Nanos(now), c);
                let Ok(d) = d else { prop_assert!(c > limit); continue };
                let Some(mv) = m.acquire(now, c) else { break };
                prop_assert_eq!((d.verdict, d.remaining), mv);
                check_times(&log, now, c, &d, &before);
            }
        }
    }
}

/// 3 per second admits exactly 3 per second over 10^6 seconds, with no drift: a greedy
/// client (acquire until rejected, then wait exactly `retry_after`) gets `burst + ⌊3·t⌋`.
#[test]
fn three_per_second_for_a_million_seconds() {
    let burst = 2;
    let mut tb = TokenBucket::new(3, Nanos(S), burst).unwrap();
    let shared = SharedTokenBucket::new(3, Nanos(S), burst).unwrap();
    let end = 1_000_000 * S;
    let (mut now, mut admitted, mut i) = (0u64, 0u64, 0u64);
    while now <= end {
        let d = tb.acquire(Nanos(now), 1).unwrap();
        assert_eq!(d, shared.acquire(Nanos(now), 1).unwrap());
        if d.is_allowed() {
            admitted += 1;
        } else {
            i += 1;
            if i % 1024 == 0 {
                assert!(
                    !tb.peek(Nanos(now + d.retry_after.0 - 1), 1)
                        .unwrap()
                        .is_allowed()
                );
            }
            now += d.retry_after.0;
        }
    }
    assert_eq!(admitted, burst + 3 * 1_000_000);
}
