//! Helpers shared by the loom models (`tests/loom_*.rs`).
//!
//! The central check is *linearizability against the single-owner form*: the decisions that
//! concurrent callers of a shared primitive received must be exactly the decisions of the
//! single-owner form applied to the same operations in *some* sequential order (every order
//! is allowed because all operations of a model overlap in time), and the final state must
//! match that order's final state.
#![allow(dead_code)]

use loom::sync::Arc;
use loom::thread;
use weir_core::{
    BatchAcquire, BatchDecision, InsufficientCapacity, Nanos, RateLimiter, SharedRateLimiter,
};

/// Every permutation of `0..n` (n ≤ 5 in the models).
pub(crate) fn permutations(n: usize) -> Vec<Vec<usize>> {
    fn go(prefix: &mut Vec<usize>, rest: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if rest.is_empty() {
            out.push(prefix.clone());
            return;
        }
        for i in 0..rest.len() {
            let x = rest.remove(i);
            prefix.push(x);
            go(prefix, rest, out);
            prefix.pop();
            rest.insert(i, x);
        }
    }
    let mut out = Vec::new();
    go(&mut Vec::new(), &mut (0..n).collect(), &mut out);
    out
}

/// Finds a sequential order of `ops` in which `replay` (a fresh single-owner instance
/// applying the operations in that order) produces exactly the observed results and final
/// state. Panics with the observation when there is none.
pub(crate) fn assert_linearizable<
    Op: core::fmt::Debug,
    R: PartialEq + core::fmt::Debug,
    S: PartialEq + core::fmt::Debug,
>(
    ops: &[Op],
    observed: &[R],
    observed_final: &S,
    replay: impl Fn(&[usize]) -> (Vec<R>, S),
) {
    for order in permutations(ops.len()) {
        let (results, fin) = replay(&order);
        if results == observed && &fin == observed_final {
            return;
        }
    }
    panic!(
        "not linearizable: ops {ops:?} observed {observed:?} final {observed_final:?} \
         match no sequential order of the single-owner form"
    );
}

/// Runs `f(i, ops[i])` for every op: each op after the first on a thread of its own
/// (spawned first), `ops[0]` on the model's own thread; the results in op order.
pub(crate) fn race<T, R, F>(ops: &'static [T], f: F) -> Vec<R>
where
    T: Copy + Send + 'static,
    R: Send + 'static,
    F: Fn(usize, T) -> R + Clone + Send + 'static,
{
    let handles: Vec<_> = (1..ops.len())
        .map(|i| {
            let f = f.clone();
            let op = ops[i];
            thread::spawn(move || f(i, op))
        })
        .collect();
    let mut results = vec![f(0, ops[0])];
    results.extend(handles.into_iter().map(|h| h.join().unwrap()));
    results
}

/// A table of models: each row `name(args…);` (attributes and doc comments allowed)
/// becomes a `#[test] fn name()` calling `$model(args…)`.
#[allow(unused_macros)]
macro_rules! model_tests {
    ($model:expr; $($(#[$m:meta])* $name:ident($($arg:expr),* $(,)?);)*) => {$(
        $(#[$m])*
        #[test]
        fn $name() {
            $model($($arg),*)
        }
    )*};
}
#[allow(unused_imports)]
pub(crate) use model_tests;

/// One operation: a whole `acquire_batch` or a single `acquire`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BatchOp {
    Batch(&'static [(u64, u64)]),
    Acquire(u64, u64),
}

pub(crate) type BatchRes = Vec<Result<BatchDecision, InsufficientCapacity>>;

/// A shared limiter with its single-owner twin and their states (compared at the end).
pub(crate) struct Kind<S, L, W> {
    pub(crate) shared: fn() -> S,
    pub(crate) single: fn() -> L,
    pub(crate) shared_word: fn(&S) -> W,
    pub(crate) single_word: fn(&L) -> W,
}

/// `acquire_batch` racing single `acquire`s (`ops[0]` on the model's own thread, the rest
/// on one thread each): the outcome of some sequential order of the single-owner form in
/// which the batch's events keep their order, and that order's final state.
pub(crate) fn batch_model<S, L, W>(kind: Kind<S, L, W>, ops: &'static [BatchOp])
where
    S: BatchAcquire + SharedRateLimiter + Send + Sync + 'static,
    L: RateLimiter + 'static,
    W: PartialEq + core::fmt::Debug + 'static,
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
        let results = race(ops, {
            let s = s.clone();
            move |_, op| run(&*s, op)
        });
        let observed: Vec<_> = results.into_iter().flatten().collect();
        let fin = Some(shared_word(&s));
        assert_linearizable(&events, &observed, &fin, |order| {
            // Only orders that keep each batch's events in order.
            let in_order = order.windows(2).all(|w| {
                let (a, b) = (events[w[0]], events[w[1]]);
                a.0 != b.0 || a.1 < b.1
            });
            if !in_order {
                return (Vec::new(), None);
            }
            let mut l = single();
            let mut res = vec![None; events.len()];
            for &i in order {
                let (_, _, now, cost) = events[i];
                res[i] = Some(l.acquire(Nanos(now), cost).map(BatchDecision::from));
            }
            (res.into_iter().flatten().collect(), Some(single_word(&l)))
        });
    });
}
