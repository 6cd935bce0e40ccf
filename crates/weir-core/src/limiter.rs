//! The traits that make every rate-limiting algorithm interchangeable.
//!
//! Following governor, an algorithm is split from its storage: an [`Algorithm`] is the
//! immutable configuration plus a *pure* step over a small `State` value. The same step
//! then serves a single-owner [`Limiter`] (config + one state), the bounded keyed table
//! ([`crate::keyed::KeyedLimiter`]: config once + one state per key) and, through a CAS
//! loop over a packed atomic, the shared forms. Frontends and bindings are generic over
//! [`RateLimiter`] (`&mut self`) or [`SharedRateLimiter`] (`&self`).
//!
//! # One word, one step: [`WordStep`]
//! Every algorithm whose state fits one `u64` (token bucket, leaky bucket, fixed window,
//! sliding-window counter) also implements [`WordStep`]: governor's *measure and replace*
//! shape over the packed word. A store reads the word, asks the pure
//! [`WordStep::step_word`] for the decision and the replacement, and publishes the
//! replacement with one CAS (retrying from the word that won on a lost race). The same
//! step drives the generic shared form ([`crate::Shared`]), the generic lock-free keyed
//! table ([`crate::keyed::KeyedShared`]) and the batch paths, so an algorithm is written
//! once. The extra methods ([`WordStep::fresh_word`], [`WordStep::charge_word`],
//! [`WordStep::off_sentinel`]) are what the keyed table's reclaim protocol needs to
//! reuse a slot without ever granting more than the exact model.

use crate::decision::{Decision, InsufficientCapacity};
use crate::time::Nanos;

/// A rate-limiting algorithm: configuration and a pure step over `State`.
pub trait Algorithm {
    /// The per-limiter (or per-key) mutable state.
    type State: Clone;

    /// The state of a limiter that has never been used (full bucket, empty window).
    fn fresh_state(&self) -> Self::State;

    /// Decides on `cost` units at `now` and, when allowed, records them in `state`.
    /// A rejection leaves `state` unchanged. `cost` above [`Algorithm::capacity`] is
    /// [`InsufficientCapacity`]; `cost == 0` is a query that never changes the state.
    fn acquire_state(
        &self,
        state: &mut Self::State,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity>;

    /// The decision [`Algorithm::acquire_state`] would return, without recording anything.
    fn peek_state(
        &self,
        state: &Self::State,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity>;

    /// True when `state` is equivalent to [`Algorithm::fresh_state`] at `now` and every later
    /// instant: forgetting it cannot grant anything extra. Keyed tables evict only such states.
    fn is_fresh_state(&self, state: &Self::State, now: Nanos) -> bool;

    /// The largest cost ever admissible at once (burst or window limit).
    fn capacity(&self) -> u64;
}

/// An [`Algorithm`] whose whole state is one packed `u64` word, with the pure step over it.
///
/// Contract, for every `word`, `now_w = now_word(now)` and checked `cost`:
/// * `step_word` never panics and equals [`Algorithm::acquire_state`] on the state the word
///   encodes, within the algorithm's documented horizon; `cost == 0` never changes what the
///   word means (it may normalise it, e.g. move a window index);
/// * `is_fresh_word(word, now_w)` implies that forgetting the word grants nothing, at
///   `now_w` and every later instant within the horizon;
/// * `fresh_word(now_w, avoid)` is fresh at `now_w` and differs from `avoid` and from
///   `u64::MAX` (the keyed table's lock sentinel);
/// * `charge_word` records `cost` without a limit check, saturating conservatively (never
///   granting more than charging it through `step_word` would);
/// * `off_sentinel(u64::MAX)` is a word different from `u64::MAX` that grants no more than
///   `u64::MAX` would, at every instant (conservative).
pub trait WordStep: Algorithm {
    /// `now` in the word's time base (units of `1/k` ns for GCRA, ns for windows), mod 2^64.
    fn now_word(&self, now: Nanos) -> u64;
    /// [`InsufficientCapacity`] when `cost` can never be admitted at once.
    fn check_cost(&self, cost: u64) -> Result<(), InsufficientCapacity>;
    /// The decision on `cost` (already checked) at `now_w` for the stored `word`, and the
    /// word to store instead (`None`: leave it).
    fn step_word(&self, word: u64, now_w: u64, cost: u64) -> (Decision, Option<u64>);
    /// True when `word` is equivalent to a fresh state at `now_w` and later.
    fn is_fresh_word(&self, word: u64, now_w: u64) -> bool;
    /// A fresh word at `now_w`, different from `avoid` and from `u64::MAX`.
    fn fresh_word(&self, now_w: u64, avoid: u64) -> u64;
    /// `word` with `cost` charged at `now_w` and no limit check (saturating).
    fn charge_word(&self, word: u64, now_w: u64, cost: u64) -> u64;
    /// A word other than `u64::MAX` granting no more than `word` (called with `u64::MAX`).
    fn off_sentinel(&self, word: u64) -> u64;
}

/// [`Algorithm::acquire_state`] of a [`WordStep`] algorithm on its word.
#[inline]
pub(crate) fn acquire_word<A: WordStep>(
    a: &A,
    word: &mut u64,
    now: Nanos,
    cost: u64,
) -> Result<Decision, InsufficientCapacity> {
    a.check_cost(cost)?;
    let (d, new) = a.step_word(*word, a.now_word(now), cost);
    if let Some(w) = new {
        *word = w;
    }
    Ok(d)
}

/// [`Algorithm::peek_state`] of a [`WordStep`] algorithm on its word.
#[inline]
pub(crate) fn peek_word<A: WordStep>(
    a: &A,
    word: u64,
    now: Nanos,
    cost: u64,
) -> Result<Decision, InsufficientCapacity> {
    a.check_cost(cost)?;
    Ok(a.step_word(word, a.now_word(now), cost).0)
}

/// A single-owner rate limiter (`&mut self`).
pub trait RateLimiter {
    /// Decides on `cost` units at `now`; records them when allowed.
    fn acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity>;
    /// The decision `acquire` would return, without recording anything.
    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity>;
    /// True when the limiter is equivalent to a fresh one at `now`.
    fn is_fresh(&self, now: Nanos) -> bool;
    /// The largest cost ever admissible at once.
    fn capacity(&self) -> u64;
}

/// A rate limiter shared between threads (`&self`, lock-free).
pub trait SharedRateLimiter {
    /// Decides on `cost` units at `now`; records them when allowed.
    fn acquire(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity>;
    /// The decision `acquire` would return, without recording anything.
    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity>;
    /// True when the limiter is equivalent to a fresh one at `now`.
    fn is_fresh(&self, now: Nanos) -> bool;
    /// The largest cost ever admissible at once.
    fn capacity(&self) -> u64;
}

/// A single-owner limiter: an [`Algorithm`] and its state. The concrete limiters
/// ([`crate::TokenBucket`], [`crate::LeakyBucket`], …) are aliases of this type.
#[derive(Debug, Clone)]
pub struct Limiter<A: Algorithm> {
    pub(crate) algorithm: A,
    pub(crate) state: A::State,
}

impl<A: Algorithm> Limiter<A> {
    /// A fresh limiter running `algorithm`.
    pub fn from_algorithm(algorithm: A) -> Self {
        let state = algorithm.fresh_state();
        Limiter { algorithm, state }
    }
    /// The configuration.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }
    /// The current state (for inspection and tests).
    pub fn state(&self) -> &A::State {
        &self.state
    }
    /// Forgets all history: the limiter becomes fresh.
    pub fn reset(&mut self) {
        self.state = self.algorithm.fresh_state();
    }
    /// Decides on `cost` units at `now`; records them when allowed (see [`Algorithm`]).
    #[inline]
    pub fn acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        self.algorithm.acquire_state(&mut self.state, now, cost)
    }
    /// The decision [`Limiter::acquire`] would return, without recording anything.
    #[inline]
    pub fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        self.algorithm.peek_state(&self.state, now, cost)
    }
    /// True when the limiter is equivalent to a fresh one at `now` (and stays so).
    pub fn is_fresh(&self, now: Nanos) -> bool {
        self.algorithm.is_fresh_state(&self.state, now)
    }
}

impl<A: Algorithm> RateLimiter for Limiter<A> {
    #[inline]
    fn acquire(&mut self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        self.algorithm.acquire_state(&mut self.state, now, cost)
    }
    #[inline]
    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        self.algorithm.peek_state(&self.state, now, cost)
    }
    fn is_fresh(&self, now: Nanos) -> bool {
        self.algorithm.is_fresh_state(&self.state, now)
    }
    fn capacity(&self) -> u64 {
        self.algorithm.capacity()
    }
}
