//! Loom models of `acquire_batch` on the other lock-free limiters ([`SharedLeakyBucket`],
//! [`SharedFixedWindow`], [`SharedSlidingWindow`]; the token bucket's is in
//! `loom_token_bucket.rs`): a batch racing single `acquire`s has the outcome of some
//! sequential order of the single-owner form in which the batch's events keep their order.
//! A committed batch is one unit (its events consecutive, at the CAS); one whose CAS lost
//! is decided again per event, each event linearised on its own like `acquire`, so other
//! calls may fall between its events. The model checks each event separately, in batch
//! order, and the final state word.
#![cfg(weir_loom)]

mod loom_common;

use loom::sync::Arc;
use loom::thread;
use loom_common::assert_linearizable;
use weir_core::{
    BatchAcquire, BatchDecision, FixedWindow, InsufficientCapacity, LeakyBucket, Nanos,
    RateLimiter, SharedFixedWindow, SharedLeakyBucket, SharedRateLimiter, SharedSlidingWindow,
    SlidingWindow,
};

/// One operation: a whole `acquire_batch` or a single `acquire`.
#[derive(Debug, Clone, Copy)]
enum BatchOp {
    Batch(&'static [(u64, u64)]),
    Acquire(u64, u64),
}

type BatchRes = Vec<Result<BatchDecision, InsufficientCapacity>>;

/// A shared limiter with its single-owner twin and their state words.
struct Kind<S, L> {
    shared: fn() -> S,
    single: fn() -> L,
    shared_word: fn(&S) -> u64,
    single_word: fn(&L) -> u64,
}

fn batch_model<S, L>(kind: Kind<S, L>, ops: &'static [BatchOp])
where
    S: BatchAcquire + SharedRateLimiter + Send + Sync + 'static,
    L: RateLimiter + 'static,
{
    fn run<S: BatchAcquire + SharedRateLimiter>(s: &S, op: BatchOp) -> BatchRes {
        match op {
            BatchOp::Batch(evs) => {
                let mut out = vec![
                    Err(InsufficientCapacity {
                        cost: 0,
                        capacity: 0
                    });
                    evs.len()
                ];
                s.acquire_batch(
                    evs.len(),
                    |i| (Nanos(evs[i].0), evs[i].1),
                    |i, d| out[i] = d,
                );
                out
            }
            BatchOp::Acquire(now, cost) => {
                vec![s.acquire(Nanos(now), cost).map(BatchDecision::from)]
            }
        }
    }
    // The events as ops of their own: (op index, event index, now, cost).
    let events: Vec<(usize, usize, u64, u64)> = ops
        .iter()
        .enumerate()
        .flat_map(|(o, op)| match *op {
            BatchOp::Batch(evs) => evs
                .iter()
                .enumerate()
                .map(|(j, &(t, c))| (o, j, t, c))
                .collect::<Vec<_>>(),
            BatchOp::Acquire(t, c) => vec![(o, 0, t, c)],
        })
        .collect();
    let Kind {
        shared,
        single,
        shared_word,
        single_word,
    } = kind;
    loom::model(move || {
        let s = Arc::new(shared());
        let handles: Vec<_> = ops[1..]
            .iter()
            .map(|&op| {
                let s = s.clone();
                thread::spawn(move || run(&*s, op))
            })
            .collect();
        let mut results = vec![run(&*s, ops[0])];
        results.extend(handles.into_iter().map(|h| h.join().unwrap()));
        let observed: Vec<_> = results.into_iter().flatten().collect();
        let fin = shared_word(&s);
        assert_linearizable(&events, &observed, &fin, |order| {
            // Only orders that keep each batch's events in order.
            let in_order = order.windows(2).all(|w| {
                let (a, b) = (events[w[0]], events[w[1]]);
                a.0 != b.0 || a.1 < b.1
            });
            if !in_order {
                return (Vec::new(), u64::MAX);
            }
            let mut l = single();
            let mut res = vec![None; events.len()];
            for &i in order {
                let (_, _, now, cost) = events[i];
                res[i] = Some(l.acquire(Nanos(now), cost).map(BatchDecision::from));
            }
            (res.into_iter().flatten().collect(), single_word(&l))
        });
    });
}

fn leaky() -> Kind<SharedLeakyBucket, LeakyBucket> {
    Kind {
        shared: || SharedLeakyBucket::new(1, Nanos(1_000), 1, 0, false).unwrap(),
        single: || LeakyBucket::new(1, Nanos(1_000), 1, 0, false).unwrap(),
        shared_word: |s| s.raw_state(),
        single_word: |l| l.state().0 as u64,
    }
}

fn fixed() -> Kind<SharedFixedWindow, FixedWindow> {
    Kind {
        shared: || SharedFixedWindow::new(2, Nanos(1_000)).unwrap(),
        single: || FixedWindow::new(2, Nanos(1_000)).unwrap(),
        shared_word: |s| s.raw_state(),
        single_word: |l| l.state().0,
    }
}

fn sliding() -> Kind<SharedSlidingWindow, SlidingWindow> {
    Kind {
        shared: || SharedSlidingWindow::new(2, Nanos(1_000)).unwrap(),
        single: || SlidingWindow::new(2, Nanos(1_000)).unwrap(),
        shared_word: |s| s.raw_state(),
        single_word: |l| l.state().0,
    }
}

#[test]
fn leaky_batch_is_atomic_against_acquire() {
    // Capacity 2 (burst 1) at one instant, the second delayed: the batch takes both or
    // the single acquire takes one first; a cost-0 query and a cost above the capacity.
    batch_model(
        leaky(),
        &[
            BatchOp::Batch(&[(0, 1), (0, 0), (0, 3), (0, 1), (0, 1)]),
            BatchOp::Acquire(0, 1),
        ],
    );
}

#[test]
fn leaky_batch_with_rewind_races_two_acquires() {
    batch_model(
        leaky(),
        &[
            BatchOp::Batch(&[(500, 1), (0, 1), (1_500, 2)]),
            BatchOp::Acquire(0, 1),
            BatchOp::Acquire(1_000, 1),
        ],
    );
}

#[test]
fn fixed_window_batch_is_atomic_against_acquire() {
    // A window boundary inside the batch, a rewind, and a cost-0 normalisation.
    batch_model(
        fixed(),
        &[
            BatchOp::Batch(&[(0, 1), (10, 1), (1_000, 2), (5, 1), (3_000, 0)]),
            BatchOp::Acquire(0, 1),
        ],
    );
}

#[test]
fn fixed_window_batch_races_two_acquires() {
    batch_model(
        fixed(),
        &[
            BatchOp::Batch(&[(0, 2), (999, 1)]),
            BatchOp::Acquire(0, 1),
            BatchOp::Acquire(1_000, 2),
        ],
    );
}

#[test]
fn sliding_window_batch_is_atomic_against_acquire() {
    // Events in one window (the decoded fast path), then the next (weights) and a rewind.
    batch_model(
        sliding(),
        &[
            BatchOp::Batch(&[(0, 1), (10, 1), (20, 1), (1_500, 1), (100, 1)]),
            BatchOp::Acquire(0, 1),
        ],
    );
}

#[test]
fn sliding_window_batch_races_two_acquires() {
    batch_model(
        sliding(),
        &[
            BatchOp::Batch(&[(0, 1), (500, 1)]),
            BatchOp::Acquire(0, 1),
            BatchOp::Acquire(1_200, 1),
        ],
    );
}
