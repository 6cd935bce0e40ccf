//! Leaky bucket with nginx `limit_req` semantics, in exact integer nanoseconds.
//!
//! # Why
//! A token bucket with a large burst lets thousands of requests through in a millisecond
//! (seed 004). nginx's `limit_req` *shapes* instead: requests above the rate are queued
//! (delayed) up to `burst`, the first `delay` of them pass at once, and only beyond `burst`
//! are they rejected. Users know these knobs, so we reproduce them exactly.
//!
//! # The nginx algorithm
//! nginx keeps, per key, `excess` (in milli-requests) and `last` (ms). For a request at `now`:
//! `excess = max(0, excess − rate·(now − last)/1000 + 1000)`; if `excess > burst` the request is
//! rejected and nothing changes; otherwise `last = now`, the new excess is stored, and the
//! request passes at once when `nodelay` or `excess ≤ delay`, else after
//! `(excess − delay) / rate`. Note that the clamp comes *after* adding the request: a request
//! after an idle period leaves `excess = 0`, so `burst = 0` still admits one request per
//! emission interval `T = per / rate`.
//!
//! # What we change, and why
//! * nginx counts whole milliseconds and rate in milli-requests per second, so it rounds
//!   (at 3 r/s every leak is off by up to 1/3 of a request per call). We keep excess in exact
//!   units of `1/k` ns (`k = rate / gcd(per, rate)`, `T = per / gcd` units), so there is no
//!   rounding in admission; delays and `retry_after` round **up** to whole ns.
//! * State: `excess` and `last` are folded into one number, `V = last + excess + T` — the
//!   instant at which the *next* request would find `excess = 0`. Then the next request
//!   sees `excess' = max(V − now, 0)`, exactly nginx's value, and passing sets
//!   `V = now + excess' + T`. So the leaky bucket is a GCRA on `V` with capacity `burst + 1`
//!   plus a delay threshold; we reuse the token bucket's exact arithmetic, and the shared
//!   form is again one `AtomicU64` with the same serial-number horizon
//!   ([`crate::TokenBucketConfig::horizon`], computed here for capacity `burst + 1`).
//! * Clock going backwards: nginx treats `now < last` as "no time passed" (and, oddly, a
//!   rewind of more than 60 s as 1 ms). We evaluate at the given instant, which sees *more*
//!   excess than "no time passed" — never less — without storing `last`.
//! * Cost `n > 1` is `n` requests arriving at the same instant: the excess after them is
//!   `max(V − now, 0) + (n − 1)·T`; the largest cost ever admissible is `burst + 1`.
//!
//! # Decisions
//! [`Verdict::Admit`] (pass now), [`Verdict::Delay`]`(d)` (pass after `d`; the capacity is
//! already taken, the caller holds the request), or [`Verdict::Reject`] with `retry_after`
//! = time until this cost would be accepted (possibly with a delay). `remaining` counts
//! requests that would pass *without delay* right after; `reset_after` is the time until
//! that grows by one (zero when idle).
//!
//! # Batches: [`SharedLeakyBucket::acquire_batch`]
//! The token bucket's batch (see [`crate::batch`]) with the leaky bucket's figures: one load
//! and one CAS per [`crate::batch::BATCH`] events, and a branch-free step on the local word
//! that yields `acquire`'s verdict, `remaining`, `retry_after` and `delay` exactly (all by
//! selects and multiply-shift divisions by the constants `T` and `k`).
//!
//! ```
//! use weir_core::{LeakyBucket, Nanos, Verdict};
//! // 2 r/s, burst 2, delay 1: the 1st passes, the 2nd passes (≤ delay), the 3rd waits.
//! let mut lb = LeakyBucket::new(2, Nanos::from_secs(1), 2, 1, false).unwrap();
//! assert_eq!(lb.acquire(Nanos::ZERO, 1).unwrap().verdict, Verdict::Admit);
//! assert_eq!(lb.acquire(Nanos::ZERO, 1).unwrap().verdict, Verdict::Admit);
//! assert_eq!(lb.acquire(Nanos::ZERO, 1).unwrap().verdict, Verdict::Delay(Nanos::from_millis(500)));
//! assert_eq!(lb.acquire(Nanos::ZERO, 1).unwrap().verdict, Verdict::Reject);
//! ```

use crate::arith::HALF;
use crate::batch::{BatchDecision, Events, Outcomes};
use crate::decision::{Decision, InsufficientCapacity, Verdict};
use crate::error::ParamError;
use crate::limiter::{Algorithm, Limiter, WordStep};
use crate::shared::LocalRun;
pub use crate::shared::Shared;
use crate::sync::Ordering;
use crate::time::Nanos;
use crate::token_bucket::TokenBucketConfig;

/// Validated leaky-bucket parameters (nginx `limit_req`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucketConfig {
    /// GCRA on `V` with capacity `burst + 1`.
    gcra: TokenBucketConfig,
    burst: u64,
    delay: u64,
    nodelay: bool,
    /// `(min(delay, burst) + 1) · T` units (or `(burst + 1) · T` with `nodelay`): a request
    /// whose `excess + T` is at most this passes without delay.
    undelayed: u64,
}

/// The leaky-bucket state: `V = last + excess + T` in units of `1/k` ns (exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeakyBucketState(pub u128);

impl LeakyBucketConfig {
    /// `rate` requests per `per`; `burst` excess requests accepted (queued); the first `delay`
    /// of them pass without delay; `nodelay` passes every accepted request at once.
    /// `rate` and `per` must be non-zero (`burst = 0` is nginx's default and valid).
    pub fn new(
        rate: u64,
        per: Nanos,
        burst: u64,
        delay: u64,
        nodelay: bool,
    ) -> Result<Self, ParamError> {
        let cap = burst.checked_add(1).ok_or(ParamError::TooLarge("burst"))?;
        let gcra = TokenBucketConfig::new(rate, per, cap)?;
        let t = gcra.units_per_token();
        let free = if nodelay { burst } else { delay.min(burst) };
        Ok(LeakyBucketConfig {
            gcra,
            burst,
            delay,
            nodelay,
            undelayed: (free + 1) * t, // ≤ W
        })
    }
    /// Requests per [`LeakyBucketConfig::per`].
    pub fn rate(&self) -> u64 {
        self.gcra.rate()
    }
    /// The period of the rate.
    pub fn per(&self) -> Nanos {
        self.gcra.per()
    }
    /// Excess requests accepted.
    pub fn burst(&self) -> u64 {
        self.burst
    }
    /// Excess requests passed without delay.
    pub fn delay(&self) -> u64 {
        self.delay
    }
    /// Whether every accepted request passes at once.
    pub fn nodelay(&self) -> bool {
        self.nodelay
    }
    /// The exactness horizon of the shared form (see the module docs).
    pub fn horizon(&self) -> Nanos {
        self.gcra.horizon()
    }

    /// The decision for an accepted request; `new` = new `V − now` in units.
    #[inline]
    fn passed(&self, new: u64, cost: u64) -> Decision {
        let g = &self.gcra;
        let (remaining, reset_after) = g.levels_against(new as u128, self.undelayed);
        let verdict = if cost == 0 || new <= self.undelayed {
            Verdict::Admit
        } else {
            Verdict::Delay(g.units_to_ns_ceil(new - self.undelayed))
        };
        Decision {
            verdict,
            remaining,
            retry_after: Nanos::ZERO,
            reset_after,
        }
    }

    #[cold]
    fn refused(&self, b: u128, cost: u64) -> Decision {
        let mut d = self.gcra.rejected(b, cost);
        (d.remaining, d.reset_after) = self.gcra.levels_against(b, self.undelayed);
        d
    }

    #[inline]
    fn decide(&self, b: u128, cost: u64) -> (Decision, Option<u64>) {
        match self.gcra.fits(b, cost) {
            Some(new) => (self.passed(new, cost), (cost != 0).then_some(new)),
            None => (self.refused(b, cost), None),
        }
    }
}

impl Algorithm for LeakyBucketConfig {
    type State = LeakyBucketState;

    fn fresh_state(&self) -> LeakyBucketState {
        LeakyBucketState(0)
    }

    fn acquire_state(
        &self,
        state: &mut LeakyBucketState,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity> {
        self.gcra.check(cost)?;
        let now_u = self.gcra.now_units(now);
        let (d, new) = self.decide(state.0.saturating_sub(now_u), cost);
        if let Some(a) = new {
            state.0 = now_u + a as u128;
        }
        Ok(d)
    }

    fn peek_state(
        &self,
        state: &LeakyBucketState,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity> {
        self.gcra.check(cost)?;
        let now_u = self.gcra.now_units(now);
        Ok(self.decide(state.0.saturating_sub(now_u), cost).0)
    }

    fn is_fresh_state(&self, state: &LeakyBucketState, now: Nanos) -> bool {
        state.0 <= self.gcra.now_units(now)
    }

    fn capacity(&self) -> u64 {
        self.burst + 1
    }
}

/// A single-owner leaky bucket (`&mut self`); see the [module docs](self).
pub type LeakyBucket = Limiter<LeakyBucketConfig>;

/// `new(rate, per, burst, delay, nodelay)` of a leaky-bucket form built by `$from` from
/// its [`LeakyBucketConfig`].
macro_rules! new_from_params {
    ($doc:literal, $from:path) => {
        #[doc = $doc]
        pub fn new(
            rate: u64,
            per: Nanos,
            burst: u64,
            delay: u64,
            nodelay: bool,
        ) -> Result<Self, ParamError> {
            Ok($from(LeakyBucketConfig::new(
                rate, per, burst, delay, nodelay,
            )?))
        }
    };
}

impl Limiter<LeakyBucketConfig> {
    new_from_params!(
        "An idle leaky bucket; parameters as in [`LeakyBucketConfig::new`].",
        Limiter::from_algorithm
    );
}

impl WordStep for LeakyBucketConfig {
    #[inline(always)]
    fn now_word(&self, now: Nanos) -> u64 {
        self.gcra.now_units_wrapping(now)
    }
    #[inline(always)]
    fn check_cost(&self, cost: u64) -> Result<(), InsufficientCapacity> {
        self.gcra.check(cost)
    }
    /// The step on `V mod 2^64`, read serial-number style (the token bucket's horizon).
    #[inline]
    fn step_word(&self, word: u64, now_w: u64, cost: u64) -> (Decision, Option<u64>) {
        let b = TokenBucketConfig::wrapping_ahead(word, now_w);
        let (d, new) = self.decide(b as u128, cost);
        (d, new.map(|a| now_w.wrapping_add(a)))
    }
    fn is_fresh_word(&self, word: u64, now_w: u64) -> bool {
        self.gcra.is_fresh_word(word, now_w)
    }
    fn fresh_word(&self, now_w: u64, avoid: u64) -> u64 {
        self.gcra.fresh_word(now_w, avoid)
    }
    fn charge_word(&self, word: u64, now_w: u64, cost: u64) -> u64 {
        self.gcra.charge_word(word, now_w, cost)
    }
    fn off_sentinel(&self, word: u64) -> u64 {
        self.gcra.off_sentinel(word)
    }
}

impl LocalRun for LeakyBucketConfig {
    const DELAYS: bool = true;

    /// Events `a..b` on the local state word `s` (shared-form semantics); returns the new
    /// word and whether any event accepted a cost (wrote the word). Branch-free per event
    /// apart from the (never taken, for a validated trace) cost check: the same integers
    /// as [`LeakyBucketConfig::decide`] and [`SharedLeakyBucket::acquire`].
    #[inline(always)]
    fn run_local<E: Events, W: Outcomes>(
        &self,
        mut s: u64,
        a: usize,
        b: usize,
        event: &mut E,
        write: &mut W,
    ) -> (u64, bool) {
        let g = &self.gcra;
        let (k, t, w, undelayed) = (
            g.k_divider(),
            g.t_divider(),
            g.window_units(),
            self.undelayed,
        );
        let cap = g.burst();
        let mut wrote = false;
        for i in a..b {
            let (now, cost) = event(i);
            if cost > cap {
                write(
                    i,
                    Err(InsufficientCapacity {
                        cost,
                        capacity: cap,
                    }),
                );
                continue;
            }
            let now_u = now.0.wrapping_mul(k.divisor());
            let d = s.wrapping_sub(now_u);
            let ahead = if d < HALF { d } else { 0 };
            // ahead < 2^63 and inc ≤ W ≤ 2^62: no overflow.
            let need = ahead + cost * t.divisor();
            let fits = need <= w;
            let write_now = fits & (cost != 0);
            wrote |= write_now;
            // Selects the compiler must keep (the verdict flips at random on a trace over
            // the rate: a branch on it would be mispredicted about half the time).
            s = core::hint::select_unpredictable(write_now, now_u.wrapping_add(need), s);
            // `remaining` counts against the no-delay threshold; `retry_after` is
            // ⌈(need − W) / k⌉, zero when it fits; `delay` is ⌈(need − undelayed) / k⌉ for
            // an accepted cost above the threshold (a cost 0 is never delayed). Every
            // numerator is below 2^63: need − W ≤ ahead, and need ≤ W when accepted.
            let after = core::hint::select_unpredictable(fits, need, ahead);
            let remaining = t.div_lt_half(undelayed.saturating_sub(after));
            // One division for both waits: when it fits, `need − W` saturates to 0 (no
            // retry) and the numerator is the delay's; when not, nothing is accepted (no
            // delay) and it is the retry's.
            let over =
                core::hint::select_unpredictable(write_now, need.saturating_sub(undelayed), 0);
            let wait = k.div_ceil_lt_half(core::hint::select_unpredictable(
                fits,
                over,
                need.saturating_sub(w),
            ));
            let retry = core::hint::select_unpredictable(fits, 0, wait);
            let delay = core::hint::select_unpredictable(fits, wait, 0);
            write(
                i,
                Ok(BatchDecision {
                    allowed: fits,
                    remaining,
                    retry_after: Nanos(retry),
                    delay: Nanos(delay),
                }),
            );
        }
        (s, wrote)
    }
}

/// A lock-free leaky bucket shared between threads: the generic [`Shared`] over one
/// `AtomicU64` holding `V mod 2^64`.
pub type SharedLeakyBucket = Shared<LeakyBucketConfig>;

impl Shared<LeakyBucketConfig> {
    new_from_params!(
        "An idle bucket; parameters as in [`LeakyBucketConfig::new`].",
        Self::from_config
    );
    /// Makes the bucket idle at `now`.
    pub fn reset(&self, now: Nanos) {
        self.word
            .store(self.config.gcra.now_units_wrapping(now), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: u64 = 1_000_000_000;

    #[test]
    fn nginx_burst_zero_spaces_requests() {
        let mut lb = LeakyBucket::new(1, Nanos(S), 0, 0, false).unwrap();
        assert_eq!(lb.acquire(Nanos(0), 1).unwrap().verdict, Verdict::Admit);
        let d = lb.acquire(Nanos(S / 2), 1).unwrap();
        assert_eq!(d.verdict, Verdict::Reject);
        assert_eq!(d.retry_after, Nanos(S / 2));
        assert_eq!(lb.acquire(Nanos(S), 1).unwrap().verdict, Verdict::Admit);
        assert!(lb.acquire(Nanos(S), 2).is_err());
    }

    #[test]
    fn delay_and_nodelay() {
        let mut lb = LeakyBucket::new(10, Nanos(S), 5, 0, false).unwrap();
        assert_eq!(lb.acquire(Nanos(0), 1).unwrap().verdict, Verdict::Admit);
        for i in 1..=5 {
            assert_eq!(
                lb.acquire(Nanos(0), 1).unwrap().verdict,
                Verdict::Delay(Nanos(i * S / 10))
            );
        }
        assert_eq!(lb.acquire(Nanos(0), 1).unwrap().verdict, Verdict::Reject);
        let mut lb = LeakyBucket::new(10, Nanos(S), 5, 0, true).unwrap();
        assert_eq!(lb.peek(Nanos(0), 0).unwrap().remaining, 6);
        for _ in 0..6 {
            assert_eq!(lb.acquire(Nanos(0), 1).unwrap().verdict, Verdict::Admit);
        }
        let d = lb.acquire(Nanos(0), 1).unwrap();
        assert_eq!(d.verdict, Verdict::Reject);
        assert_eq!(d.retry_after, Nanos(S / 10));
        assert!(lb.is_fresh(Nanos(S * 6 / 10)));
        assert!(!lb.is_fresh(Nanos(S * 6 / 10 - 1)));
    }

    #[test]
    fn shared_matches_single() {
        let cfg = LeakyBucketConfig::new(3, Nanos(S), 4, 2, false).unwrap();
        crate::shared::assert_equals_single(cfg, 2000, S / 2, 4);
        assert!(LeakyBucketConfig::new(1, Nanos(S), u64::MAX, 0, false).is_err());
    }
}
