//! Property and differential tests of the resilience primitives against the reference
//! models in `weir_core::reference`, on arbitrary operation sequences with clock rewinds
//! and `u64` extremes; plus bounded std-thread stress tests of the shared forms.
//!
//! Not under miri: proptest's machinery in the interpreter takes minutes per case. Miri runs
//! the unit and doc tests, which exercise every primitive (see docs/VERIFICATION.md).
#![cfg(not(miri))]

use core::num::NonZeroU64;
use core::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use proptest::prelude::*;
use std::sync::Arc;
use weir_core::reference::{
    BreakerModel, ModelTicket, RetryBudgetModel, SemaphoreModel, backoff_schedule,
};
use weir_core::{
    Backoff, Breaker, BreakerConfig, BreakerState, Cooldown, Deadline, Jitter, Nanos, RetryBudget,
    RetryBudgetConfig, Semaphore, SharedBreaker, SharedRetryBudget, SlowCall, SplitMix64, Ticket,
};

/// Clock moves: small steps, big steps, rewinds and jumps to the extremes.
#[derive(Debug, Clone)]
enum Tick {
    Forward(u64),
    Back(u64),
    To(u64),
}

fn tick(unit: u64) -> impl Strategy<Value = Tick> {
    prop_oneof![
        6 => (0..4 * unit).prop_map(Tick::Forward),
        1 => (0..4 * unit).prop_map(Tick::Back),
        1 => prop_oneof![Just(0u64), Just(u64::MAX), Just(u64::MAX - unit), any::<u64>()]
            .prop_map(Tick::To),
    ]
}

fn apply(now: &mut u64, t: &Tick) {
    *now = match *t {
        Tick::Forward(d) => now.saturating_add(d),
        Tick::Back(d) => now.saturating_sub(d),
        Tick::To(v) => v,
    };
}

// ---- semaphore ----------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum SemOp {
    Acquire(u64),
    Release(usize),
}

fn sem_op() -> impl Strategy<Value = SemOp> {
    prop_oneof![
        3 => prop_oneof![0..4u64, Just(u64::MAX), Just(u64::MAX / 2 + 1), any::<u64>()]
            .prop_map(SemOp::Acquire),
        2 => any::<usize>().prop_map(SemOp::Release),
    ]
}

proptest! {
    #[test]
    fn semaphore_matches_counter_model(
        max in prop_oneof![1..6u64, Just(u64::MAX), any::<u64>().prop_map(|v| v.max(1))],
        ops in prop::collection::vec(sem_op(), 0..60),
    ) {
        let sem = Arc::new(Semaphore::new(NonZeroU64::new(max).unwrap()));
        let mut model = SemaphoreModel::new(max);
        let mut held = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            match *op {
                SemOp::Acquire(n) => {
                    let expect = model.try_acquire(n);
                    if i % 3 == 0 {
                        // a borrowed permit, released at once
                        let p = sem.try_acquire(n);
                        prop_assert_eq!(p.is_some(), expect);
                        prop_assert!(sem.in_use() <= max);
                        if let Some(p) = p {
                            model.release(p.count());
                        }
                    } else {
                        let p = Semaphore::try_acquire_owned(Arc::clone(&sem), n);
                        prop_assert_eq!(p.is_some(), expect);
                        held.extend(p);
                    }
                }
                SemOp::Release(j) => {
                    if !held.is_empty() {
                        let p = held.swap_remove(j % held.len());
                        model.release(p.count());
                        drop(p);
                    }
                }
            }
            prop_assert_eq!(sem.in_use(), model.used);
            prop_assert!(sem.in_use() <= max);
            prop_assert_eq!(sem.available(), max - model.used);
        }
    }

    // ---- deadline -----------------------------------------------------------------------

    #[test]
    fn deadline_arithmetic(
        start in prop_oneof![any::<u64>(), Just(0u64), Just(u64::MAX)],
        total in prop_oneof![any::<u64>(), 0..1000u64, Just(u64::MAX)],
        now in prop_oneof![any::<u64>(), Just(0u64), Just(u64::MAX)],
        cap in any::<u64>(),
        backoff in prop_oneof![any::<u64>(), 0..1000u64],
        min_useful in prop_oneof![any::<u64>(), 0..1000u64],
    ) {
        let d = Deadline::new(Nanos(start), Nanos(total));
        let elapsed = now.saturating_sub(start) as u128;
        let remaining = (total as u128).saturating_sub(elapsed) as u64;
        prop_assert_eq!(d.remaining(Nanos(now)), Nanos(remaining));
        prop_assert!(d.remaining(Nanos(now)) <= Nanos(total));
        prop_assert_eq!(d.expired(Nanos(now)), remaining == 0);
        prop_assert_eq!(d.per_try(Nanos(now), Nanos(cap)), Nanos(cap.min(remaining)));
        let left = remaining.saturating_sub(backoff);
        prop_assert_eq!(
            d.can_start_attempt(Nanos(now), Nanos(backoff), Nanos(min_useful)),
            left > 0 && left >= min_useful
        );
        prop_assert!(d.child(Nanos(now), Nanos(cap)).total() <= Nanos(remaining));
    }

    // ---- backoff ------------------------------------------------------------------------

    #[test]
    fn backoff_bounds(
        base in prop_oneof![0..1000u64, any::<u64>(), Just(1u64)],
        extra in prop_oneof![0..100_000u64, any::<u64>(), Just(u64::MAX)],
        milli in prop_oneof![Just(1000u32), Just(1001), Just(1500), Just(2000), Just(3000), 1000..1_000_000u32],
        attempt in prop_oneof![0..70u32, Just(u32::MAX), any::<u32>()],
        jitter in prop_oneof![Just(Jitter::None), Just(Jitter::Full), Just(Jitter::Equal), Just(Jitter::Decorrelated)],
        seed in any::<u64>(),
    ) {
        let max = base.saturating_add(extra);
        let b = Backoff::new(Nanos(base), Nanos(max), milli, jitter).unwrap();
        let mut rng = SplitMix64::new(seed);
        let s = b.schedule(attempt);
        prop_assert!(s <= Nanos(max));
        if attempt == 0 {
            prop_assert_eq!(s, Nanos::ZERO);
        } else {
            prop_assert!(s >= Nanos(base));
        }
        if milli == 2000 && attempt > 0 {
            let exact = (base as u128) << (attempt - 1).min(100);
            prop_assert_eq!(s.0 as u128, exact.min(max as u128));
        }
        if attempt <= 3000 && (milli >= 1100 || attempt <= 70) {
            let ideal = backoff_schedule(Nanos(base), Nanos(max), milli, attempt);
            let got = s.0 as f64;
            prop_assert!((got - ideal).abs() <= ideal * 1e-9 + 1.0, "got {} ideal {}", got, ideal);
        }
        let d = b.delay(attempt, &mut rng);
        prop_assert!(d <= Nanos(max));
        match jitter {
            Jitter::None => prop_assert_eq!(d, s),
            Jitter::Full => prop_assert!(d <= s),
            Jitter::Equal => prop_assert!(Nanos(s.0 / 2) <= d && d <= s),
            Jitter::Decorrelated => prop_assert!(attempt == 0 || d >= Nanos(base)),
        }
        let mut seq = b.sequence();
        let mut prev = Nanos(base);
        for _ in 0..20 {
            let d = seq.next_delay(&mut rng);
            prop_assert!(d <= Nanos(max));
            if jitter == Jitter::Decorrelated {
                prop_assert!(d >= Nanos(base) && d <= Nanos(base).max(prev.saturating_mul(3)).min(Nanos(max)));
            }
            prev = d;
        }
    }
}

// ---- retry budget -------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum BudgetOp {
    Deposit(u8),
    Withdraw(u8),
    Tick(Tick),
}

fn budget_op() -> impl Strategy<Value = BudgetOp> {
    prop_oneof![
        4 => (1..8u8).prop_map(BudgetOp::Deposit),
        3 => (1..4u8).prop_map(BudgetOp::Withdraw),
        2 => tick(400_000_000).prop_map(BudgetOp::Tick),
    ]
}

proptest! {
    #[test]
    fn retry_budget_never_over_grants_and_forms_agree(
        ratio_ppm in prop_oneof![Just(0u32), Just(200_000), Just(1_000_000), Just(333_333), 0..3_000_000u32],
        min_per_sec in prop_oneof![Just(0u32), 0..5u32, Just(u32::MAX)],
        ttl in prop_oneof![Just(1_000_000_000u64), Just(1_500_000_001), Just(10_000_000_000), 1_000_000_000..30_000_000_000u64],
        start in prop_oneof![Just(0u64), any::<u64>()],
        ops in prop::collection::vec(budget_op(), 0..120),
    ) {
        let cfg = RetryBudgetConfig::new(ratio_ppm, min_per_sec, Nanos(ttl)).unwrap();
        let mut single = RetryBudget::new(cfg);
        let shared = SharedRetryBudget::new(cfg);
        let mut model = RetryBudgetModel::new(ratio_ppm, min_per_sec, Nanos(ttl));
        let mut now = start;
        for op in &ops {
            match op {
                BudgetOp::Deposit(n) => for _ in 0..*n {
                    single.deposit(Nanos(now));
                    shared.deposit(Nanos(now));
                    model.deposit(Nanos(now));
                },
                BudgetOp::Withdraw(n) => for _ in 0..*n {
                    let a = single.try_withdraw(Nanos(now));
                    let b = shared.try_withdraw(Nanos(now));
                    prop_assert_eq!(a, b);
                    if a {
                        prop_assert!(model.check_grant(Nanos(now)), "over-grant at {}", now);
                    }
                },
                BudgetOp::Tick(t) => apply(&mut now, t),
            }
            let avail = single.available(Nanos(now));
            prop_assert_eq!(avail, shared.available(Nanos(now)));
            prop_assert!(u128::from(avail) <= model.available(Nanos(now)));
        }
    }
}

#[test]
fn retry_budget_steady_state_is_close_to_exact() {
    // 100 req/s, ratio 0.1, ttl 10 s: the exact model allows 100 retries per window; the
    // slotted window loses less than two slots' worth of deposits.
    let cfg = RetryBudgetConfig::new(100_000, 0, Nanos::from_secs(10)).unwrap();
    let mut b = RetryBudget::new(cfg);
    let mut now = 0u64;
    for _ in 0..3000 {
        b.deposit(Nanos(now));
        now += 10_000_000;
    }
    let granted = (0..200).filter(|_| b.try_withdraw(Nanos(now))).count();
    assert!((75..=100).contains(&granted), "{granted}");
}

// ---- breaker ------------------------------------------------------------------------------

fn breaker_config() -> impl Strategy<Value = BreakerConfig> {
    (
        (
            prop::option::of(1..5u32),
            prop::option::of(prop_oneof![Just(500_000u32), 1..=1_000_000u32]),
            prop::option::of((0..30u64, 1..=1_000_000u32)),
            (1..=10u32, 1..=10u32),
        ),
        (
            0..60u64,
            0..200u64,
            prop_oneof![Just(1000u32), Just(1500), Just(2000), Just(3000)],
            prop_oneof![Just(0u32), Just(300_000), Just(1_000_000)],
        ),
        (
            1..4u32,
            1..4u32,
            prop_oneof![Just(0u64), 1..150u64],
            1..120u64,
        ),
    )
        .prop_map(
            |(
                (consec, rate, slow, (window, min)),
                (base, extra, mult, jit),
                (probes, succ, ramp, pto),
            )| {
                BreakerConfig {
                    consecutive_failures: consec,
                    failure_rate_ppm: rate,
                    slow_call: slow.map(|(t, r)| SlowCall {
                        threshold: Nanos(t),
                        rate_ppm: r,
                    }),
                    window,
                    min_calls: min.min(window),
                    cooldown: Cooldown {
                        base: Nanos(base),
                        max: Nanos(base + extra),
                        multiplier_milli: mult,
                        jitter_ppm: jit,
                    },
                    probes,
                    successes: succ,
                    ramp: Nanos(ramp),
                    probe_timeout: Nanos(pto),
                }
            },
        )
}

#[derive(Debug, Clone)]
enum BrOp {
    Allow,
    Success(usize, u64),
    Failure(usize, u64),
    Cancel(usize),
    Drop(usize),
    Tick(Tick),
}

fn br_op() -> impl Strategy<Value = BrOp> {
    prop_oneof![
        5 => Just(BrOp::Allow),
        3 => (any::<usize>(), 0..40u64).prop_map(|(i, d)| BrOp::Success(i, d)),
        3 => (any::<usize>(), 0..40u64).prop_map(|(i, d)| BrOp::Failure(i, d)),
        1 => any::<usize>().prop_map(BrOp::Cancel),
        1 => any::<usize>().prop_map(BrOp::Drop),
        3 => tick(40).prop_map(BrOp::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn breaker_forms_match_the_model(
        cfg in breaker_config(),
        seed in any::<u64>(),
        start in prop_oneof![Just(0u64), any::<u64>()],
        ops in prop::collection::vec(br_op(), 0..150),
    ) {
        let mut single = Breaker::new(cfg, SplitMix64::new(seed)).unwrap();
        let shared = SharedBreaker::new(cfg, seed).unwrap();
        let mut model = BreakerModel::new(cfg, SplitMix64::new(seed));
        let mut tickets: Vec<(Ticket, Ticket, ModelTicket)> = Vec::new();
        let mut now = start;
        for op in &ops {
            let n = Nanos(now);
            match *op {
                BrOp::Allow => {
                    let a = single.allow(n);
                    let b = shared.allow(n);
                    let m = model.allow(n);
                    match (a, b, m) {
                        (Ok(a), Ok(b), Ok((mt, mtr))) => {
                            prop_assert_eq!(a.ticket.is_probe(), mt.probe);
                            prop_assert_eq!(b.ticket.is_probe(), mt.probe);
                            prop_assert_eq!(a.transition, mtr);
                            prop_assert_eq!(b.transition, mtr);
                            tickets.push((a.ticket, b.ticket, mt));
                        }
                        (Err(a), Err(b), Err(m)) => {
                            prop_assert_eq!(a, m);
                            prop_assert_eq!(b, m);
                        }
                        (a, b, m) => prop_assert!(false, "diverged: {:?} {:?} {:?}", a, b, m),
                    }
                }
                BrOp::Success(i, d) | BrOp::Failure(i, d) if !tickets.is_empty() => {
                    let failed = matches!(op, BrOp::Failure(..));
                    let (a, b, m) = tickets.swap_remove(i % tickets.len());
                    let ta = single.record(a, n, Nanos(d), failed);
                    let tb = shared.record(b, n, Nanos(d), failed);
                    let tm = model.record(m, n, Nanos(d), failed);
                    prop_assert_eq!(ta, tm);
                    prop_assert_eq!(tb, tm);
                }
                BrOp::Cancel(i) if !tickets.is_empty() => {
                    let (a, b, m) = tickets.swap_remove(i % tickets.len());
                    single.cancel(a);
                    shared.cancel(b);
                    model.cancel(m);
                }
                BrOp::Drop(i) if !tickets.is_empty() => {
                    drop(tickets.swap_remove(i % tickets.len())); // an unrecorded ticket
                }
                BrOp::Tick(ref t) => apply(&mut now, t),
                _ => {}
            }
            let n = Nanos(now);
            prop_assert_eq!(single.state(n), model.state(n));
            prop_assert_eq!(shared.state(n), model.state(n));
            prop_assert_eq!(single.probes_in_flight(), model.probes_in_flight());
            prop_assert_eq!(shared.probes_in_flight(), model.probes_in_flight());
            prop_assert!(shared.probes_in_flight() <= cfg.probes);
            prop_assert_eq!(single.failed_recoveries(), model.failed_recoveries());
            prop_assert_eq!(shared.failed_recoveries(), model.failed_recoveries());
        }
    }
}

#[test]
fn breaker_dead_backend_sees_a_handful_then_recovers_by_itself() {
    // Seed 001 scenario: a dead backend, then it comes back.
    let cfg = BreakerConfig {
        consecutive_failures: Some(5),
        cooldown: Cooldown {
            base: Nanos::from_secs(5),
            max: Nanos::from_secs(60),
            multiplier_milli: 2000,
            jitter_ppm: 200_000,
        },
        probes: 2,
        successes: 2,
        ramp: Nanos::from_secs(10),
        ..BreakerConfig::default()
    };
    let b = SharedBreaker::new(cfg, 7).unwrap();
    let mut attempts = 0;
    let mut transitions = Vec::new();
    let mut now = Nanos::ZERO;
    let step = Nanos::from_millis(10);
    while now < Nanos::from_secs(60) {
        if let Ok(a) = b.allow(now) {
            attempts += 1;
            transitions.extend(a.transition);
            transitions.extend(b.record_failure(a.ticket, now, step));
        }
        now = now + step;
    }
    // 5 to trip, then one probe per cooldown (5, 10, 20 s ± 20 %)
    assert!((6..=10).contains(&attempts), "{attempts}");
    // backend healthy again: recovers through HALF_OPEN and the ramp
    let mut closed = false;
    while now < Nanos::from_secs(300) {
        if let Ok(a) = b.allow(now) {
            transitions.extend(a.transition);
            if let Some(t) = b.record_success(a.ticket, now, step) {
                closed |= t.to == BreakerState::Closed;
                transitions.push(t);
            }
        }
        now = now + step;
    }
    assert!(closed);
    assert_eq!(b.state(now), BreakerState::Closed);
    assert!(b.allow(now).is_ok());
    for w in transitions.windows(2) {
        assert_eq!(w[0].to, w[1].from, "timeline is continuous");
        assert!(w[0].at <= w[1].at);
    }
}

// ---- std-thread stress (bounded) ----------------------------------------------------------

/// One failure opens it, a zero cooldown (the next `allow` half-opens), `probes` probes
/// that never time out.
fn zero_cooldown(probes: u32) -> BreakerConfig {
    BreakerConfig {
        consecutive_failures: Some(1),
        cooldown: Cooldown::NONE,
        probes,
        probe_timeout: Nanos::MAX,
        ..BreakerConfig::default()
    }
}

/// A shared breaker on `cfg` (seed 1), opened by one failure at 0.
fn opened(cfg: BreakerConfig) -> Arc<SharedBreaker> {
    let b = Arc::new(SharedBreaker::new(cfg, 1).unwrap());
    let t = b.allow(Nanos(0)).unwrap().ticket;
    b.record_failure(t, Nanos(0), Nanos(0));
    b
}

/// The probes the threads hold at once, and the most they ever held.
#[derive(Default)]
struct LiveProbes {
    live: AtomicI64,
    worst: AtomicI64,
}

impl LiveProbes {
    /// Counts a probe as live for a moment.
    fn hold(&self) {
        let n = self.live.fetch_add(1, Ordering::SeqCst) + 1;
        self.worst.fetch_max(n, Ordering::SeqCst);
        core::hint::spin_loop();
        self.live.fetch_sub(1, Ordering::SeqCst);
    }

    fn worst(&self) -> i64 {
        self.worst.load(Ordering::SeqCst)
    }
}

#[test]
fn stress_shared_breaker_probe_cap() {
    const CAP: u32 = 2;
    // open it; with a zero cooldown the next allow half-opens
    let b = opened(BreakerConfig {
        successes: 3,
        ..zero_cooldown(CAP)
    });
    let live = Arc::new(LiveProbes::default());
    let closes = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|id| {
            let (b, live, closes) = (b.clone(), live.clone(), closes.clone());
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    let Ok(a) = b.allow(Nanos(1)) else { continue };
                    if !a.ticket.is_probe() {
                        // closed again: push it back open
                        b.record_failure(a.ticket, Nanos(1), Nanos(0));
                        continue;
                    }
                    live.hold();
                    match (i + id) % 3 {
                        0 => b.cancel(a.ticket),
                        1 => {
                            if let Some(t) = b.record_success(a.ticket, Nanos(1), Nanos(0))
                                && t.to == BreakerState::Closed
                            {
                                closes.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        _ => {
                            b.record_failure(a.ticket, Nanos(1), Nanos(0));
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Stale probes of an earlier epoch may overlap new ones in `live`, so the exact check is
    // on the packed counter; `worst` is a sanity bound.
    assert!(b.probes_in_flight() <= CAP);
    assert!(live.worst() <= 4);
}

#[test]
fn stress_shared_breaker_probe_cap_single_epoch() {
    // Probes are only cancelled: the breaker stays in one HALF_OPEN epoch, so the number
    // of live probes observed by the threads must never exceed the cap.
    const CAP: u32 = 3;
    let b = opened(zero_cooldown(CAP));
    let live = Arc::new(LiveProbes::default());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (b, live) = (b.clone(), live.clone());
            std::thread::spawn(move || {
                for _ in 0..50_000 {
                    if let Ok(a) = b.allow(Nanos(1)) {
                        assert!(a.ticket.is_probe());
                        live.hold();
                        b.cancel(a.ticket);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(live.worst() <= i64::from(CAP));
    assert_eq!(b.probes_in_flight(), 0);
    assert_eq!(b.state(Nanos(1)), BreakerState::HalfOpen);
}

#[test]
fn stress_semaphore_never_over_grants() {
    const MAX: u64 = 5;
    let sem = Arc::new(Semaphore::new(NonZeroU64::new(MAX).unwrap()));
    let held = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4u64)
        .map(|id| {
            let (sem, held) = (sem.clone(), held.clone());
            std::thread::spawn(move || {
                for i in 0..50_000u64 {
                    let n = 1 + (i + id) % 3;
                    if let Some(p) = sem.try_acquire(n) {
                        let now = held.fetch_add(n, Ordering::SeqCst) + n;
                        assert!(now <= MAX, "{now}");
                        held.fetch_sub(n, Ordering::SeqCst);
                        drop(p);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(sem.in_use(), 0);
}

#[test]
fn stress_retry_budget_reserve_never_over_granted() {
    // ratio 0, reserve 100/s over 1 s: at most 100 retries in the window, from 4 threads.
    let cfg = RetryBudgetConfig::new(0, 100, Nanos::from_secs(1)).unwrap();
    let b = Arc::new(SharedRetryBudget::new(cfg));
    let granted = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (b, granted) = (b.clone(), granted.clone());
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    if b.try_withdraw(Nanos(5)) {
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                    b.deposit(Nanos(5));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let g = granted.load(Ordering::Relaxed);
    assert!((50..=100).contains(&g), "{g}");
}
