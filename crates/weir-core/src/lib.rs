//! # weir-core
//!
//! The decisions of weir — *admit, delay or reject* and *retry or stop* — as small,
//! pure state machines over an injected clock. `#![no_std]`, never `alloc`: every
//! primitive lives in caller-owned memory of a size known at compile time.
//!
//! Every primitive takes the current instant as an argument ([`Nanos`]) instead of
//! reading a clock itself, so tests and simulations run on a [`ManualClock`] and never
//! sleep. Randomness (jitter) is injected through the [`Rng`] trait.
//!
//! Each primitive comes in a single-owner form (`&mut self`) and, where threads share it,
//! a lock-free shared form (`&self`) that applies the *same* pure step in a CAS loop over
//! `portable-atomic` atomics (or `loom`'s under `--cfg weir_loom`).
//!
//! Arithmetic never panics: it saturates or is checked, and where it rounds the rounding
//! is documented on the item (always in the conservative direction: never admit more than
//! the exact model).
//!
//! ## Rate limiters
//! | primitive | single-owner | shared (lock-free) | exactness |
//! |---|---|---|---|
//! | GCRA token bucket | [`TokenBucket`] | [`SharedTokenBucket`] | exact rational rate, no horizon single-owner; shared exact within [`TokenBucketConfig::horizon`] |
//! | nginx `limit_req` leaky bucket | [`LeakyBucket`] | [`SharedLeakyBucket`] | exact ns (nginx rounds to ms) |
//! | fixed window | [`FixedWindow`] | [`SharedFixedWindow`] | exact within 2^31+ windows between calls |
//! | sliding-window counter | [`SlidingWindow`] | [`SharedSlidingWindow`] | conservative rounding of the weighted estimate |
//! | sliding log | [`SlidingLog`] | — | exact, `N` entries inline |
//! | one limit of any algorithm | [`Limit`] (the algorithm's validated config; one sliding-log cap, [`MAX_SLIDING_LOG_LIMIT`]) | | |
//! | bounded keyed state | [`KeyedLimiter`] (any [`Algorithm`]) | [`KeyedTokenBuckets`] (16 B/key) | evicts only fresh-equivalent state; overflow limiter |
//!
//! The token bucket also has a lean path for callers that only branch on the verdict:
//! `check` ([`Granted`]: the fill level, with `remaining` / `reset_after` computed on
//! demand; [`Denied`]) and `try_acquire` (`bool`), the same step as `acquire`.
//!
//! All answer a [`Decision`] (verdict, `remaining`, `retry_after`, `reset_after`) and
//! implement [`RateLimiter`] or [`SharedRateLimiter`]; bad parameters are a
//! [`ParamError`] at construction, a cost that can never fit is [`InsufficientCapacity`].
//!
//! ## Upstreams
//! [`SharedOutlier`] with one [`EndpointState`] per endpoint: passive outlier ejection
//! (streaks, failure share, growing ejections, a maximum ejected share, panic) and the
//! choice of an endpoint (round robin or two random choices), lock-free.
//!
//! ## Targets without 64-bit atomics
//! Shared forms use 64-bit atomics. On targets that lack them (e.g. `thumbv7em-none-eabihf`)
//! enable the `fallback` feature: portable-atomic then implements them with a global
//! spin-lock based fallback (correct, but not lock-free on such targets).
#![no_std]
#![warn(
    clippy::std_instead_of_core,
    clippy::std_instead_of_alloc,
    clippy::alloc_instead_of_core
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(any(feature = "std", test))]
extern crate std;

pub(crate) mod arith;
pub(crate) mod sync;
#[cfg(test)]
pub(crate) mod test_support;

pub mod backoff;
pub mod batch;
pub mod breaker;
pub mod deadline;
pub mod decision;
pub mod error;
pub mod keyed;
pub mod leaky_bucket;
pub mod limit;
pub mod limiter;
pub mod outlier;
pub mod quota;
// Test oracles, not API: compiled only for the differential tests, fuzz targets and
// benchmarks that ask for them, so a build of the engine carries none of their code.
#[cfg(feature = "reference")]
#[doc(hidden)]
pub mod reference;
pub mod retry_budget;
pub mod rng;
pub mod semaphore;
pub mod shared;
pub mod sliding_log;
pub mod time;
pub mod token_bucket;
pub mod window;

pub use backoff::{Backoff, BackoffSequence, Jitter};
pub use batch::{BatchAcquire, BatchDecision};
pub use breaker::{
    Admission, Admitted, Breaker, BreakerConfig, BreakerState, Cooldown, RejectReason, Rejected,
    SharedBreaker, SlowCall, Ticket, Transition,
};
pub use deadline::Deadline;
pub use decision::{Decision, InsufficientCapacity, Verdict};
pub use error::ParamError;
pub use keyed::{KeyedDecision, KeyedLimiter, KeyedShared, KeyedTokenBuckets, Slot};
pub use leaky_bucket::{LeakyBucket, LeakyBucketConfig, SharedLeakyBucket};
pub use limit::{Limit, LimitKind, MAX_SLIDING_LOG_LEN, MAX_SLIDING_LOG_LIMIT, SlidingLogLimit};
pub use limiter::{Algorithm, Limiter, RateLimiter, SharedRateLimiter, WordStep};
pub use outlier::{
    AttemptKind, Choice, EjectReason, Ejection, EndpointState, OutlierConfig, Pick, SharedOutlier,
};
pub use quota::{Period, PeriodId, QuotaCount, QuotaDecision};
pub use retry_budget::{RetryBudget, RetryBudgetConfig, SharedRetryBudget};
pub use rng::{Rng, SplitMix64};
pub use semaphore::{OwnedPermit, Permit, Semaphore};
pub use shared::Shared;
pub use sliding_log::{SlidingLog, SlidingLogConfig};
#[cfg(feature = "quanta")]
pub use time::QuantaClock;
#[cfg(feature = "std")]
pub use time::StdClock;
pub use time::{Clock, ManualClock, Nanos};
pub use token_bucket::{Denied, Granted, SharedTokenBucket, TokenBucket, TokenBucketConfig};
pub use window::{
    FixedWindow, FixedWindowConfig, SharedFixedWindow, SharedSlidingWindow, SlidingWindow,
    SlidingWindowConfig,
};
