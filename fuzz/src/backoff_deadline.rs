//! Backoff and deadline budget: bounds that must hold for any parameters and any draw.
//!
//! Backoff: every delay ≤ `max`; no jitter = the schedule, which is non-decreasing in the
//! attempt and within 1e-9 relative (or 1 ns) of the reference `f64` schedule; full jitter
//! ∈ `[0, d]`; equal jitter ∈ `[⌊d/2⌋, d]`; decorrelated ∈ `[min(base, hi), hi]` with
//! `hi = min(max, max(base, 3·prev))`; a sequence equals the stateless form for the
//! stateless strategies. Deadline: `remaining + elapsed` = budget (saturating), `per_try ≤`
//! both its cap and `remaining`, `expired` iff nothing remains, and `can_start_attempt`
//! only when the backoff plus the useful minimum fit.

use crate::num::{N, Tick};
use arbitrary::Arbitrary;
use weir_core::reference::backoff_schedule;
use weir_core::{Backoff, Deadline, Jitter, Nanos, SplitMix64};

/// Parameters and probes.
#[derive(Debug, Arbitrary)]
pub struct Input {
    base: N,
    max: N,
    multiplier_milli: u32,
    jitter: u8,
    seed: u64,
    attempts: Vec<u32>,
    start: N,
    budget: N,
    probes: Vec<(Tick, N, N)>,
}

/// Runs one input.
pub fn check(input: Input) {
    let jitter = [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
    ][usize::from(input.jitter % 4)];
    let mut rng = SplitMix64::new(input.seed);
    if let Ok(b) = Backoff::new(
        Nanos(input.base.0),
        Nanos(input.max.0),
        input.multiplier_milli,
        jitter,
    ) {
        let mut seq = b.sequence();
        let mut seq_rng = SplitMix64::new(input.seed ^ 1);
        let mut twin_rng = SplitMix64::new(input.seed ^ 1);
        let mut prev = b.base();
        let mut prev_sched = Nanos::ZERO;
        for attempt in 0..40u32 {
            let s = b.schedule(attempt);
            assert!(s <= b.max());
            assert!(s >= prev_sched, "schedule decreases at attempt {attempt}");
            prev_sched = s;
            check_schedule(&b, attempt, s);
            let d = seq.next_delay(&mut seq_rng);
            assert!(d <= b.max(), "sequence delay above max");
            let twin = match jitter {
                Jitter::Decorrelated => b.delay_after(prev, &mut twin_rng),
                _ => b.delay(attempt + 1, &mut twin_rng),
            };
            assert_eq!(d, twin, "sequence differs from the stateless form");
            prev = d;
        }
        for &attempt in input.attempts.iter().take(64) {
            let s = b.schedule(attempt);
            check_schedule(&b, attempt, s);
            let d = b.delay(attempt, &mut rng);
            assert!(d <= b.max(), "delay {d:?} above max {:?}", b.max());
            match jitter {
                Jitter::None => assert_eq!(d, s),
                Jitter::Full => assert!(d <= s),
                Jitter::Equal => assert!(d >= Nanos(s.0 / 2) && d <= s),
                Jitter::Decorrelated => {
                    let p = b.schedule(attempt.saturating_sub(1)).max(if attempt <= 1 {
                        b.base()
                    } else {
                        Nanos::ZERO
                    });
                    let hi = b.base().max(p.saturating_mul(3)).min(b.max());
                    if attempt > 0 {
                        assert!(
                            d <= hi && d >= b.base().min(hi),
                            "decorrelated {d:?} outside [{:?}, {hi:?}]",
                            b.base().min(hi)
                        );
                    }
                }
            }
        }
    }

    let dl = Deadline::new(Nanos(input.start.0), Nanos(input.budget.0));
    let mut now = input.start.0;
    for (tick, cap, min_useful) in input.probes.into_iter().take(64) {
        now = tick.apply(now);
        let t = Nanos(now);
        let rem = dl.remaining(t);
        assert!(rem <= Nanos(input.budget.0));
        assert_eq!(dl.expired(t), rem.is_zero());
        let elapsed = t.saturating_sub(Nanos(input.start.0));
        assert_eq!(rem, Nanos(input.budget.0).saturating_sub(elapsed));
        let p = dl.per_try(t, Nanos(cap.0));
        assert!(p <= rem && p <= Nanos(cap.0));
        assert_eq!(p, rem.min(Nanos(cap.0)));
        let backoff = Nanos(cap.0);
        let ok = dl.can_start_attempt(t, backoff, Nanos(min_useful.0));
        if ok {
            assert!(
                u128::from(backoff.0) + u128::from(min_useful.0) <= u128::from(rem.0),
                "attempt allowed without room for backoff + min_useful"
            );
        }
    }
}

fn check_schedule(b: &Backoff, attempt: u32, s: Nanos) {
    if attempt > 200 {
        return; // the reference multiplies `attempt` times
    }
    let r = backoff_schedule(b.base(), b.max(), b.multiplier_milli(), attempt);
    let err = (s.0 as f64 - r).abs();
    assert!(
        err <= 1.0 + r * 1e-9,
        "schedule({attempt}) = {s:?}, reference {r}"
    );
}
