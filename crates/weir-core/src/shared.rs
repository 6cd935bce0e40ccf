//! The generic lock-free shared form: one `AtomicU64` and a CAS loop around a
//! [`WordStep`].
//!
//! # Why
//! Each word algorithm used to carry its own copy of the same loop (load, step, CAS, retry
//! from the word that won). [`Shared`] is that loop once: [`crate::SharedLeakyBucket`],
//! [`crate::SharedFixedWindow`] and [`crate::SharedSlidingWindow`] are aliases of it, so a
//! fix or a proof (loom models the loop) holds for all of them.
//!
//! [`crate::SharedTokenBucket`] stays its own type: its lean `check` / `try_acquire` paths
//! lay the admitted path out without a taken jump and compute the decision after the CAS,
//! which the generic step (decision and word together) cannot express without costing the
//! CAS-floor ratio. Its word is the same as `Shared<TokenBucketConfig>`'s and the keyed
//! table drives it through the same [`WordStep`] impl.

use crate::batch::{BatchAcquire, Events, Outcomes, run_batches};
use crate::decision::{Decision, InsufficientCapacity};
use crate::limiter::{SharedRateLimiter, WordStep};
use crate::sync::{AtomicU64, Ordering};
use crate::time::Nanos;

/// A limiter shared between threads (`&self`, lock-free): a [`WordStep`] algorithm and its
/// state word, updated by CAS with the algorithm's pure step.
#[derive(Debug)]
pub struct Shared<A> {
    pub(crate) config: A,
    pub(crate) word: AtomicU64,
}

/// The batch step of a word algorithm: events `a..b` on a local word (crate-private: the
/// batch contract lives in [`crate::batch`]).
pub(crate) trait LocalRun {
    /// Whether a batch outcome can carry a delay.
    const DELAYS: bool = false;
    /// Events `a..b` on the local word `s`: the new word and whether any step changed it.
    fn run_local<E: Events, W: Outcomes>(
        &self,
        s: u64,
        a: usize,
        b: usize,
        event: &mut E,
        write: &mut W,
    ) -> (u64, bool);
}

impl<A: WordStep> Shared<A> {
    /// A fresh limiter (word 0: a full bucket for instants below `2^63 / k` ns, an empty
    /// window at every instant) running `config`.
    pub fn from_config(config: A) -> Self {
        Shared {
            config,
            word: AtomicU64::new(0),
        }
    }
    /// The parameters.
    pub fn config(&self) -> &A {
        &self.config
    }
    /// Decides on `cost` at `now`; records it when admitted.
    #[inline]
    pub fn acquire(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        let c = &self.config;
        c.check_cost(cost)?;
        let now_w = c.now_word(now);
        let mut s = self.word.load(Ordering::Relaxed);
        loop {
            match c.step_word(s, now_w, cost) {
                (d, Some(n)) => {
                    match self.word.compare_exchange_weak(
                        s,
                        n,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return Ok(d),
                        Err(cur) => s = cur,
                    }
                }
                (d, None) => return Ok(d),
            }
        }
    }
    /// The decision `acquire` would return, recording nothing.
    pub fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        let c = &self.config;
        c.check_cost(cost)?;
        Ok(
            c.step_word(self.word.load(Ordering::Relaxed), c.now_word(now), cost)
                .0,
        )
    }
    /// True when the limiter is equivalent to a fresh one at `now` (full bucket, idle
    /// leaky bucket, empty window).
    pub fn is_fresh(&self, now: Nanos) -> bool {
        let c = &self.config;
        c.is_fresh_word(self.word.load(Ordering::Relaxed), c.now_word(now))
    }
    /// The raw state word, for tests and diagnostics.
    pub fn raw_state(&self) -> u64 {
        self.word.load(Ordering::Relaxed)
    }
}

#[allow(private_bounds)]
impl<A: WordStep + LocalRun> Shared<A> {
    /// Decides events `0..len` in order, as `acquire(event(i))` would one by one, and
    /// hands each outcome to `write(i, ..)`: the verdict, `remaining`, `retry_after` and
    /// (leaky bucket) `delay` of `acquire`'s [`Decision`] (not `reset_after`), or its
    /// [`InsufficientCapacity`]. One load and one CAS per [`crate::batch::BATCH`] events,
    /// with the same step on a local word; the contract (redone batches, atomicity) is
    /// [`BatchAcquire::acquire_batch`]'s.
    #[inline]
    pub fn acquire_batch<E: Events, W: Outcomes>(&self, len: usize, event: E, write: W) {
        run_batches(
            &self.word,
            len,
            event,
            write,
            |s0, a, b, event, write| self.config.run_local(s0, a, b, event, write),
            |now, cost| self.acquire(now, cost),
        );
    }
}

#[allow(private_bounds)]
impl<A: WordStep + LocalRun> BatchAcquire for Shared<A> {
    const DELAYS: bool = A::DELAYS;

    #[inline]
    fn acquire_batch<E: Events, W: Outcomes>(&self, len: usize, event: E, write: W) {
        Shared::acquire_batch(self, len, event, write);
    }
}

impl<A: WordStep> SharedRateLimiter for Shared<A> {
    #[inline]
    fn acquire(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        Shared::acquire(self, now, cost)
    }
    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        Shared::peek(self, now, cost)
    }
    fn is_fresh(&self, now: Nanos) -> bool {
        Shared::is_fresh(self, now)
    }
    fn capacity(&self) -> u64 {
        self.config.capacity()
    }
}

/// Test helper: the shared form equals the single-owner form of `alg` on `n` acquisitions
/// whose instants advance by `(i · 7919) mod max_step` and whose costs cycle `0..costs`.
#[cfg(test)]
pub(crate) fn assert_equals_single<A: WordStep + Clone>(alg: A, n: u64, max_step: u64, costs: u64)
where
    A::State: core::fmt::Debug,
{
    let mut a = crate::Limiter::from_algorithm(alg.clone());
    let b = Shared::from_config(alg);
    let mut now = 0;
    for i in 0..if cfg!(miri) { 100 } else { n } {
        now += (i * 7919) % max_step;
        let cost = i % costs;
        assert_eq!(a.acquire(Nanos(now), cost), b.acquire(Nanos(now), cost));
    }
}
