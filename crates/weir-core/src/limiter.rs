//! The traits that make every rate-limiting algorithm interchangeable.
//!
//! Following governor, an algorithm is split from its storage: an [`Algorithm`] is the
//! immutable configuration plus a *pure* step over a small `State` value. The same step
//! then serves a single-owner [`Limiter`] (config + one state), the bounded keyed table
//! ([`crate::keyed::KeyedLimiter`]: config once + one state per key) and, through a CAS
//! loop over a packed atomic, the shared forms. Frontends and bindings are generic over
//! [`RateLimiter`] (`&mut self`) or [`SharedRateLimiter`] (`&self`).

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
