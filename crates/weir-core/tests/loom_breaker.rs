//! Loom models of [`SharedBreaker`]: under every interleaving
//! - HALF_OPEN never has more than `probes` probe calls in flight (a witness counter raised by
//!   each admitted probe and lowered before it records its outcome), and exactly one caller
//!   performs OPEN → HALF_OPEN;
//! - the transitions reported by the calls form one chain from the initial state to the
//!   final state (none lost, none doubled: every `(from, to)` pair links up, in some order);
//! - concurrent failures in CLOSED trip the breaker exactly once.
#![cfg(weir_loom)]

mod loom_common;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::thread;
use loom_common::{permutations, race};
use weir_core::{
    BreakerConfig, BreakerState, Cooldown, Nanos, RejectReason, SharedBreaker, Ticket, Transition,
};

fn config(consecutive: u32, probes: u32, successes: u32) -> BreakerConfig {
    BreakerConfig {
        consecutive_failures: Some(consecutive),
        cooldown: Cooldown {
            base: Nanos(10),
            max: Nanos(10),
            multiplier_milli: 2000,
            jitter_ppm: 0,
        },
        probes,
        successes,
        probe_timeout: Nanos(1_000),
        ..BreakerConfig::default()
    }
}

/// Some order of `transitions` forms a chain `from` → … → `to`.
fn assert_chain(transitions: &[Transition], from: BreakerState, to: BreakerState) {
    let ok = permutations(transitions.len()).iter().any(|order| {
        let mut s = from;
        for &i in order {
            if transitions[i].from != s {
                return false;
            }
            s = transitions[i].to;
        }
        s == to
    });
    assert!(
        ok,
        "transitions {transitions:?} do not chain {from:?} → {to:?}"
    );
}

/// A breaker tripped at t=0 (OPEN until 10).
fn tripped(cfg: BreakerConfig) -> SharedBreaker {
    let b = SharedBreaker::new(cfg, 7).unwrap();
    let t = b.allow(Nanos(0)).unwrap().ticket;
    assert!(b.record_failure(t, Nanos(0), Nanos(1)).is_some());
    assert_eq!(b.state(Nanos(0)), BreakerState::Open);
    b
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Success,
    Failure,
    Cancel,
}

/// One caller after the cooldown: allow; if admitted as a probe, hold it (witness) and
/// record `outcome`. Returns the transitions it caused and whether it was a probe.
fn caller(
    b: &SharedBreaker,
    in_flight: &AtomicU32,
    now: u64,
    outcome: Option<Outcome>,
) -> (Vec<Transition>, bool) {
    let mut trs = Vec::new();
    match b.allow(Nanos(now)) {
        Ok(a) => {
            trs.extend(a.transition);
            let probe = a.ticket.is_probe();
            if probe {
                let n = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                assert!(
                    n <= b.config().probes,
                    "probe cap exceeded: {n} > {}",
                    b.config().probes
                );
                if outcome.is_some() {
                    // about to record: no longer in flight (a held ticket stays counted)
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let t: Ticket = a.ticket;
            match outcome {
                Some(Outcome::Success) => trs.extend(b.record_success(t, Nanos(now), Nanos(1))),
                Some(Outcome::Failure) => trs.extend(b.record_failure(t, Nanos(now), Nanos(1))),
                Some(Outcome::Cancel) => b.cancel(t),
                None => {
                    let _held: Ticket = t; // never recorded: its slot stays taken
                }
            }
            (trs, probe)
        }
        Err(r) => {
            trs.extend(r.transition);
            assert!(
                matches!(r.reason, RejectReason::Open | RejectReason::HalfOpenFull),
                "unexpected rejection {r:?}"
            );
            (trs, false)
        }
    }
}

/// Callers at the end of the cooldown (main + one thread each after the first) with the
/// given outcomes (`None`: only `allow`, keep the ticket until the end).
fn half_open_model(probes: u32, successes: u32, outcomes: &'static [Option<Outcome>]) {
    loom::model(move || {
        let b = Arc::new(tripped(config(1, probes, successes)));
        let in_flight = Arc::new(AtomicU32::new(0));
        let all = race(outcomes, {
            let (b, f) = (b.clone(), in_flight.clone());
            move |_, o| caller(&b, &f, 10, o)
        });
        let trs: Vec<Transition> = all.iter().flat_map(|(t, _)| t.iter().copied()).collect();
        let opened = trs
            .iter()
            .filter(|t| (t.from, t.to) == (BreakerState::Open, BreakerState::HalfOpen))
            .count();
        // Every caller is at t=10 and a re-open lasts until 20: one half-open episode.
        assert_eq!(opened, 1, "OPEN → HALF_OPEN by {opened} callers: {trs:?}");
        let probes_admitted = all.iter().filter(|(_, p)| *p).count() as u32;
        assert!(probes_admitted >= 1);
        let fin = b.state(Nanos(10));
        assert_chain(&trs, BreakerState::Open, fin);
        assert!(b.probes_in_flight() <= probes);
        if fin == BreakerState::HalfOpen && outcomes.iter().all(Option::is_some) {
            // Outcomes were all recorded or cancelled: no slot may stay taken.
            assert_eq!(b.probes_in_flight(), 0, "probe slot leaked: {trs:?}");
        }
    });
}

#[test]
fn probe_cap_holds_for_three_concurrent_allows() {
    // Tickets are kept (held) while the others race: at most `probes` get through.
    half_open_model(2, 3, &[None, None, None]);
}

#[test]
fn one_probe_slot_success_races_allow() {
    half_open_model(1, 1, &[Some(Outcome::Success), None]);
}

#[test]
fn two_probe_slots_success_and_failure() {
    half_open_model(2, 2, &[Some(Outcome::Success), Some(Outcome::Failure)]);
}

#[test]
fn two_probe_slots_cancel_frees_a_slot() {
    half_open_model(2, 3, &[Some(Outcome::Cancel), Some(Outcome::Success)]);
}

#[test]
fn concurrent_failures_in_closed_trip_once() {
    loom::model(|| {
        let b = Arc::new(SharedBreaker::new(config(2, 1, 1), 3).unwrap());
        let tickets: Vec<Ticket> = (0..3).map(|_| b.allow(Nanos(0)).unwrap().ticket).collect();
        let mut it = tickets.into_iter();
        let (t0, t1, t2) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        let h1 = {
            let b = b.clone();
            thread::spawn(move || b.record_failure(t1, Nanos(1), Nanos(1)))
        };
        let h2 = {
            let b = b.clone();
            thread::spawn(move || b.record_failure(t2, Nanos(1), Nanos(1)))
        };
        let r0 = b.record_success(t0, Nanos(1), Nanos(1));
        let trs: Vec<Transition> = [r0, h1.join().unwrap(), h2.join().unwrap()]
            .into_iter()
            .flatten()
            .collect();
        let fin = b.state(Nanos(1));
        assert!(trs.len() <= 1, "tripped more than once: {trs:?}");
        assert_chain(&trs, BreakerState::Closed, fin);
        // Two failures with only a success possibly between them: if the success came
        // first or last, the streak is 2 and the breaker must have tripped.
        if fin == BreakerState::Closed {
            assert!(trs.is_empty());
        }
    });
}

#[test]
fn allow_during_a_transition_is_refused_or_consistent() {
    // One thread trips the breaker while another asks to pass: the asker either passes
    // (CLOSED, before the trip) or is refused; the trip is reported exactly once.
    loom::model(|| {
        let b = Arc::new(SharedBreaker::new(config(1, 1, 1), 5).unwrap());
        let t = b.allow(Nanos(0)).unwrap().ticket;
        let h = {
            let b = b.clone();
            thread::spawn(move || b.allow(Nanos(5)))
        };
        let tr = b.record_failure(t, Nanos(0), Nanos(1));
        let a = h.join().unwrap();
        assert_eq!(
            tr.map(|t| (t.from, t.to)),
            Some((BreakerState::Closed, BreakerState::Open))
        );
        if let Err(r) = &a {
            assert_eq!(r.reason, RejectReason::Open);
            assert!(r.transition.is_none());
        }
        assert_eq!(b.state(Nanos(5)), BreakerState::Open);
    });
}
