//! Circuit breaker: single-owner vs shared (same seed) vs the plain state-machine model.
//!
//! Checked on every operation: `allow` gives the same admission (probe or not), rejection
//! (reason, `retry_after`) and transition in all three; `record_*` / `cancel` report the
//! same transitions; `state`, `probes_in_flight` and `failed_recoveries` agree; probes in
//! flight never exceed `probes`; every reported transition starts from the state the
//! breaker was in (transitions chain, none lost); a rejection for OPEN says when it ends.

use crate::num::{N, Tick};
use arbitrary::Arbitrary;
use weir_core::reference::{BreakerModel, ModelTicket};
use weir_core::{
    Breaker, BreakerConfig, BreakerState, Cooldown, Nanos, RejectReason, SharedBreaker, SlowCall,
    SplitMix64, Ticket, Transition,
};

/// A configuration and an operation sequence.
#[derive(Debug, Arbitrary)]
pub struct Input {
    consecutive: Option<u16>,
    failure_rate_ppm: Option<u32>,
    slow: Option<(N, u32)>,
    window: u8,
    min_calls: u8,
    base: N,
    max: N,
    multiplier_milli: u32,
    jitter_ppm: u32,
    probes: u8,
    successes: u8,
    ramp: N,
    probe_timeout: N,
    seed: u64,
    ops: Vec<Op>,
}

/// One operation.
#[derive(Debug, Arbitrary)]
pub enum Op {
    /// `allow`, keeping the ticket.
    Allow,
    /// Record the outcome of a held ticket (index modulo held).
    Record {
        /// Which ticket.
        which: u8,
        /// Failed?
        failed: bool,
        /// The call's duration.
        duration: N,
    },
    /// Cancel a held ticket.
    Cancel(u8),
    /// Move the clock.
    Clock(Tick),
}

struct Held {
    single: Ticket,
    shared: Ticket,
    model: ModelTicket,
}

fn config(i: &Input) -> BreakerConfig {
    BreakerConfig {
        consecutive_failures: i.consecutive.map(u32::from),
        failure_rate_ppm: i.failure_rate_ppm,
        slow_call: i.slow.map(|(t, r)| SlowCall {
            threshold: Nanos(t.0),
            rate_ppm: r,
        }),
        window: u32::from(i.window),
        min_calls: u32::from(i.min_calls),
        cooldown: Cooldown {
            base: Nanos(i.base.0),
            max: Nanos(i.max.0),
            multiplier_milli: i.multiplier_milli,
            jitter_ppm: i.jitter_ppm,
        },
        probes: u32::from(i.probes),
        successes: u32::from(i.successes),
        ramp: Nanos(i.ramp.0),
        probe_timeout: Nanos(i.probe_timeout.0),
    }
}

/// Follows reported transitions: each must start where the previous one ended (or where
/// time alone moved the breaker: OPEN reads HALF_OPEN after its cooldown and vice versa).
struct Chain(BreakerState);

impl Chain {
    fn see(&mut self, t: Option<Transition>, lazily: BreakerState) {
        if let Some(t) = t {
            assert!(
                t.from == self.0 || t.from == lazily,
                "transition {t:?} does not start from {:?} / {lazily:?}",
                self.0
            );
            assert_ne!(t.from, t.to);
            self.0 = t.to;
        }
    }
}

/// Runs one input.
pub fn check(input: Input) {
    let cfg = config(&input);
    let single = Breaker::new(cfg, SplitMix64::new(input.seed));
    let shared = SharedBreaker::new(cfg, input.seed);
    assert_eq!(single.is_ok(), shared.is_ok());
    let (Ok(mut single), Ok(shared)) = (single, shared) else {
        assert!(cfg.validate().is_err());
        return;
    };
    let mut model = BreakerModel::new(cfg, SplitMix64::new(input.seed));
    let mut held: Vec<Held> = Vec::new();
    let mut chain = Chain(BreakerState::Closed);
    let mut now = 0u64;
    for op in input.ops.into_iter().take(512) {
        let t = Nanos(now);
        let before = single.state(t);
        match op {
            Op::Allow => {
                let a = single.allow(t);
                let b = shared.allow(t);
                let m = model.allow(t);
                match (a, b, m) {
                    (Ok(a), Ok(b), Ok((mt, mtr))) => {
                        assert_eq!(a.transition, b.transition, "allow transition (shared)");
                        assert_eq!(a.transition, mtr, "allow transition (model)");
                        assert_eq!(a.ticket.is_probe(), b.ticket.is_probe());
                        assert_eq!(a.ticket.is_probe(), mt.probe);
                        chain.see(a.transition, before);
                        held.push(Held {
                            single: a.ticket,
                            shared: b.ticket,
                            model: mt,
                        });
                    }
                    (Err(a), Err(b), Err(m)) => {
                        assert_eq!(a, b, "rejection (shared) at {now}");
                        assert_eq!(a, m, "rejection (model) at {now}");
                        chain.see(a.transition, before);
                        if a.reason == RejectReason::Open && a.transition.is_none() {
                            // refused inside a running cooldown: it ends later
                            assert!(!a.retry_after.is_zero(), "OPEN refusal without a wait");
                        }
                    }
                    (a, b, m) => panic!("allow differs at {now}: {a:?} / {b:?} / {m:?}"),
                }
            }
            Op::Record {
                which,
                failed,
                duration,
            } => {
                if held.is_empty() {
                    continue;
                }
                let h = held.swap_remove(usize::from(which) % held.len());
                let d = Nanos(duration.0);
                let a = single.record(h.single, t, d, failed);
                let b = shared.record(h.shared, t, d, failed);
                let m = model.record(h.model, t, d, failed);
                assert_eq!(a, b, "record transition (shared) at {now}");
                assert_eq!(a, m, "record transition (model) at {now}");
                chain.see(a, before);
            }
            Op::Cancel(which) => {
                if held.is_empty() {
                    continue;
                }
                let h = held.swap_remove(usize::from(which) % held.len());
                single.cancel(h.single);
                shared.cancel(h.shared);
                model.cancel(h.model);
            }
            Op::Clock(tick) => now = tick.apply(now),
        }
        let t = Nanos(now);
        let s = single.state(t);
        assert_eq!(s, shared.state(t), "state (shared) at {now}");
        assert_eq!(s, model.state(t), "state (model) at {now}");
        assert_eq!(single.probes_in_flight(), shared.probes_in_flight());
        assert_eq!(single.probes_in_flight(), model.probes_in_flight());
        assert!(
            single.probes_in_flight() <= cfg.probes,
            "probe cap exceeded"
        );
        assert_eq!(single.failed_recoveries(), shared.failed_recoveries());
        assert_eq!(single.failed_recoveries(), model.failed_recoveries());
    }
}
