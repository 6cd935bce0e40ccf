//! Loom models of the other shared limiters:
//! - [`SharedLeakyBucket`], [`SharedFixedWindow`], [`SharedSlidingWindow`]: concurrent
//!   acquire / peek are linearizable against the single-owner form (the decisions the
//!   threads got are those of some sequential order, and the limiter afterwards answers
//!   every probe like that order's final state), hence never over-admit;
//! - [`KeyedShared`] (token bucket, fixed window, leaky bucket: the generic table through
//!   its reclaim path): two threads on a full two-slot table where one reclaims a fresh
//!   slot while the other updates the key living there: no admission vanishes (an admitted
//!   key's state is charged afterwards, in a slot or in the overflow limiter), and
//!   concurrent acquisitions of one key never exceed its capacity.
#![cfg(weir_loom)]

mod loom_common;

use loom::sync::Arc;
use loom::thread;
use loom_common::{assert_linearizable, model_tests, race};
use weir_core::keyed::{KeyedShared, Slot};
use weir_core::{
    Decision, FixedWindow, FixedWindowConfig, InsufficientCapacity, LeakyBucket, LeakyBucketConfig,
    Nanos, RateLimiter, SharedFixedWindow, SharedLeakyBucket, SharedRateLimiter,
    SharedSlidingWindow, SlidingWindow, TokenBucketConfig, WordStep,
};

type Res = Result<Decision, InsufficientCapacity>;

/// `(now, cost, is_acquire)`.
type Op = (u64, u64, bool);

/// Instants at which the final states are compared.
const PROBES: [u64; 4] = [0, 400, 1_000, 5_000];

/// One op, `acquire` or `peek`, on either form.
macro_rules! step {
    ($l:expr, $op:expr) => {{
        let (now, cost, acq): Op = $op;
        if acq {
            $l.acquire(Nanos(now), cost)
        } else {
            $l.peek(Nanos(now), cost)
        }
    }};
}

fn model<S, L>(shared: fn() -> S, single: fn() -> L, pre: &'static [Op], ops: &'static [Op])
where
    S: SharedRateLimiter + Send + Sync + 'static,
    L: RateLimiter + 'static,
{
    loom::model(move || {
        let s = Arc::new(shared());
        for &op in pre {
            let _ = step!(s, op);
        }
        let results = race(ops, {
            let s = s.clone();
            move |_, op| step!(s, op)
        });
        let fin: Vec<Res> = PROBES.iter().map(|&t| s.peek(Nanos(t), 1)).collect();
        assert_linearizable(ops, &results, &fin, |order| {
            let mut l = single();
            for &op in pre {
                let _ = step!(l, op);
            }
            let mut res = vec![None; ops.len()];
            for &i in order {
                res[i] = Some(step!(l, ops[i]));
            }
            let fin: Vec<Res> = PROBES.iter().map(|&t| l.peek(Nanos(t), 1)).collect();
            (res.into_iter().map(Option::unwrap).collect(), fin)
        });
    });
}

/// Shared limiter / single-owner limiter constructors, built from the same arguments.
macro_rules! forms {
    ($shared:ident, $single:ident, $($arg:expr),*) => {
        (
            || $shared::new($($arg),*).unwrap(),
            || $single::new($($arg),*).unwrap(),
        )
    };
}

/// [`model`] over a `(shared, single)` pair from [`forms!`].
fn model_forms<S, L>(forms: (fn() -> S, fn() -> L), pre: &'static [Op], ops: &'static [Op])
where
    S: SharedRateLimiter + Send + Sync + 'static,
    L: RateLimiter + 'static,
{
    model(forms.0, forms.1, pre, ops)
}

// Rows: `name(forms, pre, ops);`, ops `(now, cost, is_acquire)`.
model_tests! { model_forms;
    // 1 per µs, burst 1, delay 0: one passes, one is delayed, one rejected — in some order.
    leaky_bucket_three_requests_burst_one_delay(
        forms!(SharedLeakyBucket, LeakyBucket, 1, Nanos(1_000), 1, 0, false),
        &[], &[(0, 1, true), (0, 1, true), (0, 1, true)]);
    leaky_bucket_nodelay_mixed_instants(
        forms!(SharedLeakyBucket, LeakyBucket, 3, Nanos(1_000), 2, 0, true),
        &[(0, 1, true)], &[(400, 2, true), (0, 1, true), (400, 1, false)]);
    fixed_window_at_the_limit(forms!(SharedFixedWindow, FixedWindow, 2, Nanos(1_000)),
        &[(900, 1, true)], &[(950, 1, true), (1_000, 2, true), (999, 1, true)]);
    sliding_window_across_a_boundary(forms!(SharedSlidingWindow, SlidingWindow, 2, Nanos(1_000)),
        &[(900, 2, true)], &[(1_500, 1, true), (1_400, 1, true), (2_100, 1, true)]);
}

/// Three algorithms with the same shape on a 1 µs grid: one admission fits at 0, a second
/// at 0 does not, and at 1000 the state is fresh again (reclaimable).
fn algorithms() -> (TokenBucketConfig, FixedWindowConfig, LeakyBucketConfig) {
    (
        TokenBucketConfig::new(1, Nanos(1_000), 1).unwrap(),
        FixedWindowConfig::new(1, Nanos(1_000)).unwrap(),
        LeakyBucketConfig::new(1, Nanos(1_000), 0, 0, false).unwrap(),
    )
}

/// Two slots; keys 1, 2, 3 all have home slot 0.
fn table<A: WordStep>(alg: A) -> KeyedShared<A, Vec<Slot>> {
    KeyedShared::new(alg, (0..2).map(|_| Slot::new()).collect())
}

/// Keys 1 and 2 fill both slots at 0; at 1000 both are fresh. Key 3 reclaims a slot while
/// key 1 updates its own: no admission vanishes.
fn reclaim_races_an_update<A: WordStep + Clone + Send + Sync + 'static>(alg: A) {
    loom::model(move || {
        let t = Arc::new(table(alg.clone()));
        assert!(t.acquire(1, Nanos(0), 1).unwrap().decision.is_allowed());
        assert!(t.acquire(2, Nanos(0), 1).unwrap().decision.is_allowed());
        let h = {
            let t = t.clone();
            thread::spawn(move || t.acquire(3, Nanos(1_000), 1).unwrap())
        };
        let one = t.acquire(1, Nanos(1_000), 1).unwrap();
        let three = h.join().unwrap();
        for (key, d) in [(1u64, one), (3, three)] {
            if d.decision.is_allowed() {
                // the admission was charged somewhere: the key (or the overflow) is empty
                let again = t.acquire(key, Nanos(1_000), 1).unwrap();
                assert!(
                    !again.decision.is_allowed() || (again.overflow != d.overflow),
                    "key {key}: admission at 1000 vanished ({d:?}, then {again:?})"
                );
            }
        }
    });
}

/// Two threads acquire the same new key at once: exactly one admission (capacity 1).
fn same_key_never_over_admits<A: WordStep + Clone + Send + Sync + 'static>(alg: A) {
    loom::model(move || {
        let t = Arc::new(table(alg.clone()));
        assert!(t.acquire(2, Nanos(0), 1).unwrap().decision.is_allowed());
        let h = {
            let t = t.clone();
            thread::spawn(move || t.acquire(1, Nanos(0), 1).unwrap())
        };
        let a = t.acquire(1, Nanos(0), 1).unwrap();
        let b = h.join().unwrap();
        let admitted = [a, b].iter().filter(|d| d.decision.is_allowed()).count();
        assert_eq!(admitted, 1, "key 1 with capacity 1: {a:?} / {b:?}");
    });
}

// The keyed models over each algorithm of `algorithms()`.
model_tests! { reclaim_races_an_update;
    keyed_reclaim_races_an_update(algorithms().0);
    keyed_fixed_window_reclaim_races_an_update(algorithms().1);
    keyed_leaky_bucket_reclaim_races_an_update(algorithms().2);
}
model_tests! { same_key_never_over_admits;
    keyed_same_key_never_over_admits(algorithms().0);
    keyed_fixed_window_same_key_never_over_admits(algorithms().1);
}
