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

use loom_common::{BatchOp, Kind, batch_model, model_tests};
use weir_core::{
    FixedWindow, LeakyBucket, Nanos, SharedFixedWindow, SharedLeakyBucket, SharedSlidingWindow,
    SlidingWindow,
};

fn leaky() -> Kind<SharedLeakyBucket, LeakyBucket, u64> {
    Kind {
        shared: || SharedLeakyBucket::new(1, Nanos(1_000), 1, 0, false).unwrap(),
        single: || LeakyBucket::new(1, Nanos(1_000), 1, 0, false).unwrap(),
        shared_word: |s| s.raw_state(),
        single_word: |l| l.state().0 as u64,
    }
}

fn fixed() -> Kind<SharedFixedWindow, FixedWindow, u64> {
    Kind {
        shared: || SharedFixedWindow::new(2, Nanos(1_000)).unwrap(),
        single: || FixedWindow::new(2, Nanos(1_000)).unwrap(),
        shared_word: |s| s.raw_state(),
        single_word: |l| l.state().0,
    }
}

fn sliding() -> Kind<SharedSlidingWindow, SlidingWindow, u64> {
    Kind {
        shared: || SharedSlidingWindow::new(2, Nanos(1_000)).unwrap(),
        single: || SlidingWindow::new(2, Nanos(1_000)).unwrap(),
        shared_word: |s| s.raw_state(),
        single_word: |l| l.state().0,
    }
}

// Rows: `name(kind, ops);`.
model_tests! { batch_model;
    // Capacity 2 (burst 1) at one instant, the second delayed: the batch takes both or
    // the single acquire takes one first; a cost-0 query and a cost above the capacity.
    leaky_batch_is_atomic_against_acquire(leaky(), &[
        BatchOp::Batch(&[(0, 1), (0, 0), (0, 3), (0, 1), (0, 1)]),
        BatchOp::Acquire(0, 1)]);
    leaky_batch_with_rewind_races_two_acquires(leaky(), &[
        BatchOp::Batch(&[(500, 1), (0, 1), (1_500, 2)]),
        BatchOp::Acquire(0, 1), BatchOp::Acquire(1_000, 1)]);
    // A window boundary inside the batch, a rewind, and a cost-0 normalisation.
    fixed_window_batch_is_atomic_against_acquire(fixed(), &[
        BatchOp::Batch(&[(0, 1), (10, 1), (1_000, 2), (5, 1), (3_000, 0)]),
        BatchOp::Acquire(0, 1)]);
    fixed_window_batch_races_two_acquires(fixed(), &[
        BatchOp::Batch(&[(0, 2), (999, 1)]),
        BatchOp::Acquire(0, 1), BatchOp::Acquire(1_000, 2)]);
    // Events in one window (the decoded fast path), then the next (weights) and a rewind.
    sliding_window_batch_is_atomic_against_acquire(sliding(), &[
        BatchOp::Batch(&[(0, 1), (10, 1), (20, 1), (1_500, 1), (100, 1)]),
        BatchOp::Acquire(0, 1)]);
    sliding_window_batch_races_two_acquires(sliding(), &[
        BatchOp::Batch(&[(0, 1), (500, 1)]),
        BatchOp::Acquire(0, 1), BatchOp::Acquire(1_200, 1)]);
}
