//! Windows: fixed window, sliding-window counter and sliding log, each single-owner vs
//! shared (identical by construction: same packed word) vs its plain model.
//!
//! Checked: shared == single-owner always; the model's decision while the stored window is
//! within the documented horizon (in windows) of the current one; times in decisions exact
//! (fixed window and log; the counter's `retry_after` bound); the log never counts more
//! than `limit` admissions in any window of length `W` (exact sliding window); no panic;
//! `acquire_batch` of each (the shared windows and the single-owner log) over each run of
//! acquisitions (cut at every peek) on another copy gives `acquire`'s verdicts,
//! `remaining`, `retry_after` and errors, and leaves the same state.

use crate::batch::{Pending, flush, flush_shared};
use crate::num::N;
use crate::times::check_times;
use arbitrary::Arbitrary;
use weir_core::reference::{FixedWindowModel, SlidingCounterModel, SlidingLogModel};
use weir_core::{
    BatchDecision, Decision, FixedWindow, Limiter, Nanos, Shared, SharedFixedWindow,
    SharedSlidingWindow, SlidingLog, SlidingWindow, WordStep,
};

/// Log capacity for the sliding-log checks.
const LOG: usize = 16;

/// Parameters and an operation sequence (all three windows get the same operations).
#[derive(Debug, Arbitrary)]
pub struct Input {
    limit: N,
    window: N,
    ops: Vec<Op>,
}

/// One operation: acquire, peek, or move the clock.
pub use crate::num::CostOp as Op;

/// The acquisitions each batch copy has still to take.
#[derive(Default)]
struct Pendings {
    fixed: Vec<Pending>,
    counter: Vec<Pending>,
    log: Vec<Pending>,
}

/// Runs one input.
pub fn check(input: Input) {
    let (limit, window) = (input.limit.0, input.window.0);
    let mut fixed = FixedWindow::new(limit, Nanos(window)).ok();
    let fixed_sh = SharedFixedWindow::new(limit, Nanos(window)).ok();
    assert_eq!(fixed.is_some(), fixed_sh.is_some());
    let mut counter = SlidingWindow::new(limit, Nanos(window)).ok();
    let counter_sh = SharedSlidingWindow::new(limit, Nanos(window)).ok();
    assert_eq!(counter.is_some(), counter_sh.is_some());
    let mut log = SlidingLog::<LOG>::new(limit, Nanos(window)).ok();
    let fixed_batch = SharedFixedWindow::new(limit, Nanos(window)).ok();
    let counter_batch = SharedSlidingWindow::new(limit, Nanos(window)).ok();
    let mut log_batch = log.clone();
    let mut pend = Pendings::default();
    // Each batch copy takes the pending acquisitions and must end in its twin's state.
    let mut flush_all = |pend: &mut Pendings, log: Option<&SlidingLog<LOG>>, probe: u64| {
        let Pendings {
            fixed: fixed_p,
            counter: counter_p,
            log: log_p,
        } = pend;
        if let (Some(b), Some(s)) = (fixed_batch.as_ref(), fixed_sh.as_ref()) {
            flush_shared(fixed_p, "fixed", b, s, SharedFixedWindow::raw_state);
        }
        if let (Some(b), Some(s)) = (counter_batch.as_ref(), counter_sh.as_ref()) {
            flush_shared(counter_p, "counter", b, s, SharedSlidingWindow::raw_state);
        }
        if let (Some(b), Some(s)) = (log_batch.as_mut(), log) {
            flush(log_p, "log", |p, got| {
                b.acquire_batch(
                    p.len(),
                    |i| (Nanos(p[i].0), p[i].1),
                    |i, d| got[i] = Some(d),
                );
            });
            assert_eq!(b.state().len(), s.state().len(), "log acquire_batch length");
            for t in [0, probe, u64::MAX] {
                assert_eq!(
                    b.peek(Nanos(t), 1),
                    s.peek(Nanos(t), 1),
                    "log acquire_batch state"
                );
            }
        }
    };
    if fixed.is_none() && counter.is_none() && log.is_none() {
        return;
    }
    let mut fm = FixedWindowModel::new(limit, window);
    let mut cm = SlidingCounterModel::new(limit, window);
    let mut lm = SlidingLogModel::new(limit, window);
    let f_h = fixed.as_ref().map_or(0, |f| f.algorithm().horizon());
    let c_h = counter.as_ref().map_or(0, |c| c.algorithm().horizon());
    let (mut f_ok, mut c_ok, mut l_ok) = (true, true, true);
    let mut admitted_log: Vec<u64> = Vec::new(); // instants of units the log admitted
    let mut now = 0u64;
    let mut log_latest = 0u64; // the latest instant any acquire on the log saw
    for op in input.ops.into_iter().take(256) {
        let (cost, acquire) = match op {
            Op::Clock(t) => {
                now = t.apply(now);
                continue;
            }
            Op::Acquire(N(c)) => (c, true),
            Op::Peek(N(c)) => (c, false),
        };
        // Exact while the stored window (the latest one still counting; the models hold
        // it) is within the horizon of the current one, in either direction. Peeks and
        // refused costs do not read the state.
        if acquire && cost <= limit {
            let idx = now / window.max(1);
            f_ok &= fm.cur.is_none_or(|(i, c)| c == 0 || i.abs_diff(idx) < f_h);
            c_ok &= cm
                .state
                .is_none_or(|(i, p, c)| p == 0 && c == 0 || i.abs_diff(idx) < c_h);
        }
        let t = Nanos(now);
        if !acquire {
            flush_all(&mut pend, log.as_ref(), now);
        }
        if let (Some(f), Some(fs)) = (fixed.as_mut(), fixed_sh.as_ref()) {
            let d = both("fixed", f, fs, acquire, now, cost, limit, &mut pend.fixed);
            if let (Some(d), true) = (d, f_ok && acquire) {
                assert_eq!(d, fm.acquire(now, cost), "fixed vs model at {now}");
            }
        }
        if let (Some(c), Some(cs)) = (counter.as_mut(), counter_sh.as_ref()) {
            let d = both(
                "counter",
                c,
                cs,
                acquire,
                now,
                cost,
                limit,
                &mut pend.counter,
            );
            if let (Some(d), true) = (d, c_ok && acquire) {
                let m = cm.acquire(now, cost);
                assert_eq!((d.verdict, d.remaining), m, "counter vs model at {now}");
            }
        }
        if let Some(l) = log.as_mut() {
            let before = l.clone();
            let d = if acquire {
                l.acquire(t, cost)
            } else {
                l.peek(t, cost)
            };
            if acquire {
                pend.log.push((now, cost, d.map(BatchDecision::from)));
            }
            // the log's latest instant moves on acquisitions it evaluates (not on a cost
            // above its capacity, refused before looking at the clock)
            if acquire && d.is_ok() {
                log_latest = log_latest.max(now);
            }
            match d {
                Ok(d) => {
                    let mut after = before.clone();
                    let _ = after.acquire(t, cost);
                    check_times(&before, &after, now, cost, &d);
                    if l_ok && acquire {
                        match lm.acquire(now, cost) {
                            Some(m) => assert_eq!((d.verdict, d.remaining), m, "log vs model"),
                            None => l_ok = false,
                        }
                    }
                    if acquire && d.is_allowed() {
                        let latest = log_latest;
                        admitted_log.extend(core::iter::repeat_n(latest, cost as usize));
                        // `latest` never decreases: units out of (latest − W, latest] never
                        // count again, drop them (keeps the check linear in the log size)
                        admitted_log.retain(|&a| a.saturating_add(window) > latest);
                        // exact: at most `limit` admitted units in (latest − W, latest]
                        let inside = admitted_log.len() as u64;
                        assert!(
                            inside <= limit,
                            "log admitted {inside} > {limit} in a window"
                        );
                    }
                }
                Err(_) => assert!(cost > limit.min(LOG as u64)),
            }
        }
    }
    flush_all(&mut pend, log.as_ref(), now);
}

/// One acquire (or peek) on a window's single-owner form and its shared form: they agree,
/// an admitted decision's times are exact, and an acquisition is queued for the batch
/// replay. The decision, `None` when the cost exceeds the limit.
#[allow(clippy::too_many_arguments)]
fn both<A: WordStep + Clone>(
    what: &str,
    single: &mut Limiter<A>,
    shared: &Shared<A>,
    acquire: bool,
    now: u64,
    cost: u64,
    limit: u64,
    pending: &mut Vec<Pending>,
) -> Option<Decision> {
    let t = Nanos(now);
    let before = single.clone();
    let (d, s) = if acquire {
        (single.acquire(t, cost), shared.acquire(t, cost))
    } else {
        (single.peek(t, cost), shared.peek(t, cost))
    };
    assert_eq!(d, s, "{what}: shared vs single-owner");
    if acquire {
        pending.push((now, cost, s.map(BatchDecision::from)));
    }
    match d {
        Ok(d) => {
            let mut after = before.clone();
            let _ = after.acquire(t, cost);
            check_times(&before, &after, now, cost, &d);
            Some(d)
        }
        Err(_) => {
            assert!(cost > limit);
            None
        }
    }
}
