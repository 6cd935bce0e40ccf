//! Token bucket in its GCRA form, with exact integer arithmetic.
//!
//! # Why
//! A token bucket lets a client spend a saved-up `burst` at once and then `rate` per `per`.
//! GCRA (the generic cell rate algorithm) keeps it in one number, the *theoretical arrival
//! time* `TAT`: the instant at which the bucket would be full again. A cost `n` is admitted
//! at `now` iff `max(TAT, now) + n·T ≤ now + burst·T`, where `T = per / rate` is the
//! emission interval; admitting sets `TAT = max(TAT, now) + n·T`.
//!
//! # Exactness
//! `T` is usually not a whole number of nanoseconds (3 per second: `T = 333 333 333.3̅ ns`).
//! Rounding it down over-admits forever (governor's `Nanos` interval admits 3 per
//! 999 999 999 ns, one extra every ~10^9 s per token… and much more for small `per`);
//! rounding it up under-admits forever. We do neither: time is kept in *units* of
//! `1/k` ns with `g = gcd(per, rate)`, `k = rate / g`, so that `T = per / g` units exactly,
//! and `burst·T = W` units. All decisions are then exact integer comparisons; the only
//! rounding is converting a unit count back to nanoseconds for `retry_after` /
//! `reset_after`, which rounds **up** (waiting that long is always enough). `remaining` is
//! `⌊(W − (TAT − now)) / T⌋`, exact. The model we match is the rational GCRA above (see
//! `reference::RationalGcra`, feature `reference`); `rate = 3, per = 1 s` admits exactly
//! `burst + 3·s` in `s` seconds from full, for any `s`.
//!
//! Configuration bound: `W = burst · per / g` units must be at most `2^62`
//! ([`ParamError::TooLarge`] otherwise). E.g. 1 per hour allows a burst up to ~1.28·10^6.
//!
//! # Single-owner form ([`TokenBucket`])
//! The state is `TAT` in units as a `u128` (16 bytes): `now·k < 2^128` for every `now`, so
//! the single-owner form is exact over the whole `Nanos` range with no horizon.
//!
//! # Shared form ([`SharedTokenBucket`]): one `AtomicU64`
//! The whole state must fit one `AtomicU64` so that one CAS applies the step. `TAT·k` needs
//! up to 128 bits, so the shared form stores `TAT mod 2^64` (units) and reads it in
//! serial-number style: `d = TAT − now·k (mod 2^64)`; `d < 2^63` means "TAT is `d` units
//! ahead", otherwise the TAT is in the past and the bucket is full. This is exact while
//! every call's `now` is within the **horizon** `H = (2^63 − 1 − W) / k` ns of the stored
//! TAT ([`TokenBucketConfig::horizon`]; e.g. ≈ 97 years for 3/s, ≈ 106 days for `k = 1000`,
//! ≈ 9.2 s in the pathological `k ≈ 10^9`, i.e. a rate coprime to a 1 s period near 10^9/s).
//! Beyond the horizon a 64-bit state cannot tell a long idle gap from a clock rewind —
//! they are the same residue — and we choose the side that never over-admits for idle
//! gaps: an idle gap longer than `H` (but shorter than `2^64/k` ns) may read as "TAT ahead",
//! so the bucket rejects (conservatively) for at most `H` ns before it reads full again.
//! The one documented exception to "never over-admit": a clock *rewind* by more than `H`
//! reads as a long idle gap, so it can hand out at most one extra `burst`.
//! A fresh shared bucket stores `TAT = 0`: it reads as full for `now < 2^63/k` ns (use
//! [`SharedTokenBucket::reset`] to start full at a later instant).
//! The single-owner form equals the shared form on every sequence that stays within the
//! horizon (this is property-tested).
//!
//! # Clock going backwards
//! The step is evaluated at the instant given. GCRA is monotone in `now`: an earlier
//! instant sees `TAT − now` larger, so *fewer* tokens than at the latest instant seen,
//! never more. (This is slightly stricter than "no time passed", and needs no extra state.)
//!
//! # Decisions
//! `remaining` = whole cost-1 admissions possible right after; `retry_after` (reject) = time
//! until this cost fits (rounded up to whole ns; acquiring at `now + retry_after` succeeds
//! unless something else consumed meanwhile); `reset_after` = time until `remaining` grows
//! by one, zero when full.
//!
//! # Cost
//! The hot path is one 64×64→128 multiply for `now·k`, a compare, and two
//! multiply-shift divisions by constants precomputed at construction (no `div`, no branch:
//! their numerators are below 2^62 by construction, so the hardware-division fallback and
//! its panic path are not compiled into the admitted path).
//!
//! # Lean path: [`SharedTokenBucket::check`], [`TokenBucket::check`], `try_acquire`
//! [`acquire`](SharedTokenBucket::acquire) computes the whole [`Decision`] on every call:
//! `remaining` and `reset_after` cost two multiply-shift divisions and their fix-ups, and the
//! `Result<Decision, _>` is 40 bytes. Most callers only branch on the verdict. `check`
//! applies the *same* step (same state changes, same verdicts, bit for bit) and returns
//! [`Granted`] — the bucket's fill level right after, 8 bytes — from which
//! [`Granted::remaining`], [`Granted::reset_after`] and [`Granted::decision`] compute
//! `acquire`'s figures on demand, exactly; a denial is [`Denied`] (`retry_after`, exact, or
//! the cost exceeds the burst). `try_acquire` is `check(..).is_ok()` without building even
//! that. The admitted path is then: the `now·k` multiply, one load, a compare, an add and the
//! CAS (shared) or store (single-owner).
//!
//! # Batches: [`SharedTokenBucket::acquire_batch`]
//! A trace replay decides millions of events on one bucket and records only `remaining`
//! and `retry_after` of each. Per-event `acquire` pays a `lock cmpxchg` per admission and
//! a mispredicted branch per verdict flip (a trace over the limit flips at random).
//! `acquire_batch` loads the word once per [`BATCH`] events, runs them on a local copy
//! with a branch-free step (verdict, state update, `remaining` and `retry_after` all by
//! selects and two multiply-shift divisions, the same integer figures as `acquire`) and
//! publishes the result with one CAS. A batch whose commit succeeds is linearised at the
//! CAS (at its load if it wrote nothing) as one unit. If another thread wrote the word
//! meanwhile, the CAS fails and that batch is decided again from the new state per event
//! with `acquire` (lock-free, so no livelock; each event then linearised on its own, as
//! with `acquire`). Either way the outcome is that of a sequential order of `acquire`
//! calls in which the batch's events keep their order (model-checked with loom).
//!
//! ```
//! use weir_core::{Nanos, TokenBucket, Verdict};
//! let mut tb = TokenBucket::new(3, Nanos::from_secs(1), 3).unwrap();
//! for _ in 0..3 {
//!     assert_eq!(tb.acquire(Nanos::ZERO, 1).unwrap().verdict, Verdict::Admit);
//! }
//! let d = tb.acquire(Nanos::ZERO, 1).unwrap();
//! assert_eq!(d.verdict, Verdict::Reject);
//! assert_eq!(d.retry_after, Nanos(333_333_334)); // 1/3 s, rounded up
//! assert!(tb.acquire(Nanos(333_333_334), 1).unwrap().is_allowed());
//! assert!(tb.acquire(Nanos::from_secs(4), 20).is_err()); // more than the burst, ever
//! ```

use crate::arith::{Divider, HALF, gcd};
pub use crate::batch::{BATCH, BatchDecision};
use crate::batch::{BatchAcquire, Events, Outcomes, run_batches};
use crate::decision::{Decision, InsufficientCapacity, Verdict};
use crate::error::ParamError;
use crate::limiter::{Algorithm, Limiter, SharedRateLimiter, WordStep};
use crate::sync::{AtomicU64, Ordering};
use crate::time::Nanos;

/// Largest burst window `W = burst · per / gcd(per, rate)` in units.
pub const MAX_WINDOW_UNITS: u64 = 1 << 62;

/// Validated token-bucket parameters with precomputed exact scaling. Also the
/// [`Algorithm`] behind [`TokenBucket`] and keyed tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucketConfig {
    rate: u64,
    per: Nanos,
    burst: u64,
    /// Units per nanosecond (`rate / g`).
    k: Divider,
    /// Units per token, the emission interval (`per / g`).
    t: Divider,
    /// `burst · T` units.
    w: u64,
    /// `⌈per / rate⌉` ns: `reset_after` from a full bucket.
    t_ns_ceil: u64,
}

/// The single-owner token bucket state: the TAT in units of `1/k` ns (exact, no horizon).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenBucketState(pub u128);

impl TokenBucketConfig {
    /// `rate` admissions per `per`, at most `burst` at once. Zero values are errors, as
    /// is `burst · per / gcd(per, rate) > 2^62`.
    pub const fn new(rate: u64, per: Nanos, burst: u64) -> Result<Self, ParamError> {
        if rate == 0 {
            return Err(ParamError::Zero("rate"));
        }
        if per.0 == 0 {
            return Err(ParamError::Zero("per"));
        }
        if burst == 0 {
            return Err(ParamError::Zero("burst"));
        }
        let g = gcd(per.0, rate);
        let k = rate / g;
        let t = per.0 / g;
        let w = match burst.checked_mul(t) {
            Some(w) if w <= MAX_WINDOW_UNITS => w,
            _ => return Err(ParamError::TooLarge("burst × per / gcd(per, rate)")),
        };
        Ok(TokenBucketConfig {
            rate,
            per,
            burst,
            k: Divider::new(k),
            t: Divider::new(t),
            w,
            t_ns_ceil: per.0.div_ceil(rate),
        })
    }
    /// Admissions per [`TokenBucketConfig::per`].
    pub const fn rate(&self) -> u64 {
        self.rate
    }
    /// The period of the rate.
    pub const fn per(&self) -> Nanos {
        self.per
    }
    /// The bucket capacity.
    pub const fn burst(&self) -> u64 {
        self.burst
    }
    /// How far apart (in ns) two calls on the shared form may be and stay exact; see the
    /// module docs.
    pub const fn horizon(&self) -> Nanos {
        Nanos((HALF - 1 - self.w) / self.k.divisor())
    }
    /// Units per nanosecond (`k`).
    pub const fn units_per_ns(&self) -> u64 {
        self.k.divisor()
    }
    /// The emission interval in units (`T`).
    pub const fn units_per_token(&self) -> u64 {
        self.t.divisor()
    }

    #[inline]
    pub(crate) const fn check(&self, cost: u64) -> Result<(), InsufficientCapacity> {
        if cost > self.burst {
            Err(InsufficientCapacity {
                cost,
                capacity: self.burst,
            })
        } else {
            Ok(())
        }
    }

    /// `remaining` and `reset_after` when `0 < ahead ≤ W` (the admitted case).
    #[inline(always)]
    fn levels_in(&self, ahead: u64) -> (u64, Nanos) {
        // slack ≤ W ≤ 2^62 and units ≤ T ≤ W: both below 2^63, so the branch-free
        // divisions apply (no fallback, no panic path on the hot path).
        let slack = self.w - ahead;
        let t = self.t.divisor();
        let q = self.t.div_lt_half(slack);
        let units = t - (slack - q * t);
        (q, Nanos(self.k.div_ceil_lt_half(units)))
    }

    /// `remaining` and `reset_after` counted against a smaller `window ≤ W` (the leaky
    /// bucket's no-delay threshold).
    pub(crate) fn levels_against(&self, ahead: u128, window: u64) -> (u64, Nanos) {
        if ahead == 0 {
            return (self.t.div(window), Nanos::ZERO);
        }
        let t = self.t.divisor();
        if ahead <= window as u128 {
            let slack = window - ahead as u64;
            let q = self.t.div(slack);
            (q, Nanos(self.k.div_ceil(t - (slack - q * t))))
        } else {
            (
                0,
                Nanos(self.k.div_ceil_wide(ahead - window as u128 + t as u128)),
            )
        }
    }

    /// The divider by `k` (units per ns).
    #[inline(always)]
    pub(crate) const fn k_divider(&self) -> Divider {
        self.k
    }

    /// The divider by `T` (units per token).
    #[inline(always)]
    pub(crate) const fn t_divider(&self) -> Divider {
        self.t
    }

    /// Units in `W` (`burst · T`).
    pub(crate) const fn window_units(&self) -> u64 {
        self.w
    }

    /// `⌈units / k⌉` ns.
    pub(crate) const fn units_to_ns_ceil(&self, units: u64) -> Nanos {
        Nanos(self.k.div_ceil(units))
    }

    /// `remaining` and `reset_after` when the TAT is `ahead` units after now.
    pub(crate) fn levels(&self, ahead: u128) -> (u64, Nanos) {
        if ahead == 0 {
            return (self.burst, Nanos::ZERO);
        }
        if ahead <= self.w as u128 {
            self.levels_in(ahead as u64)
        } else {
            let units = ahead - self.w as u128 + self.t.divisor() as u128;
            (0, Nanos(self.k.div_ceil_wide(units)))
        }
    }

    /// The denial for `cost` (already checked) when it does not fit at `ahead`: the exact
    /// `retry_after` of [`TokenBucketConfig::rejected`].
    #[cold]
    #[inline(never)]
    fn denied(&self, ahead: u128, cost: u64) -> Denied {
        let inc = cost * self.t.divisor();
        let wait = ahead
            .saturating_add(inc as u128)
            .saturating_sub(self.w as u128);
        Denied::RetryAfter(Nanos(self.k.div_ceil_wide(wait)))
    }

    /// `cost ≤ burst`. A cost of 0 or 1 always is (`burst ≥ 1` by construction), which
    /// the compiler sees for a constant cost: no load and no branch on the usual call.
    #[inline(always)]
    const fn within_burst(&self, cost: u64) -> bool {
        cost <= 1 || cost <= self.burst
    }

    /// The denial for a cost above the burst.
    #[cold]
    #[inline(never)]
    fn too_costly(&self, cost: u64) -> Denied {
        Denied::InsufficientCapacity(InsufficientCapacity {
            cost,
            capacity: self.burst,
        })
    }

    /// The lean single-owner step: `Ok(new ahead)` (state written unless `cost == 0`) or
    /// `Err(ahead)` (state untouched). `cost ≤ burst` is checked by the caller. Exactly the
    /// state change of [`Algorithm::acquire_state`].
    #[inline(always)]
    fn step_single(
        &self,
        state: &mut TokenBucketState,
        now: Nanos,
        cost: u64,
    ) -> Result<u64, u128> {
        // `max(TAT, now) + inc ≤ now + W` ⟺ `TAT ≤ now + (W − inc)` (for a TAT in the
        // past the left side is `now + inc ≤ now + W`): one wide compare, no saturating
        // subtraction. No overflow: `now·k ≤ (2^64 − 1)^2 = 2^128 − 2^65 + 1` and
        // `W ≤ 2^62`.
        let now_u = self.now_units(now);
        let inc = cost * self.t.divisor(); // ≤ w: cost ≤ burst
        if state.0 <= now_u + (self.w - inc) as u128 {
            let base = if state.0 > now_u { state.0 } else { now_u };
            let new = base + inc as u128;
            if cost != 0 {
                state.0 = new;
            }
            // new − now_u ≤ W < 2^63: the low words suffice.
            Ok((new as u64).wrapping_sub(now_u as u64))
        } else {
            Err(state.0 - now_u)
        }
    }

    /// The pure GCRA step: the new `ahead` when `cost` (already checked) fits, `None` when
    /// it does not. Kept minimal: it sits between the load and the CAS of the shared form.
    #[inline(always)]
    pub(crate) fn fits(&self, ahead: u128, cost: u64) -> Option<u64> {
        let inc = cost * self.t.divisor(); // ≤ w, cost ≤ burst
        if ahead <= (self.w - inc) as u128 {
            Some(ahead as u64 + inc)
        } else {
            None
        }
    }

    /// The decision after admitting, from the new `ahead`.
    #[inline(always)]
    pub(crate) fn admitted(&self, new_ahead: u64, cost: u64) -> Decision {
        let (remaining, reset_after) = if new_ahead == cost * self.t.divisor() {
            // From a full bucket (or a cost-0 query on one): no division needed.
            if new_ahead == 0 {
                (self.burst, Nanos::ZERO)
            } else {
                (self.burst - cost, Nanos(self.t_ns_ceil))
            }
        } else {
            self.levels_in(new_ahead)
        };
        Decision {
            verdict: Verdict::Admit,
            remaining,
            retry_after: Nanos::ZERO,
            reset_after,
        }
    }

    /// The decision when `cost` does not fit at `ahead`.
    #[cold]
    #[inline(never)]
    pub(crate) fn rejected(&self, ahead: u128, cost: u64) -> Decision {
        let (remaining, reset_after) = self.levels(ahead);
        let inc = cost * self.t.divisor();
        let retry = self.k.div_ceil_wide(ahead + inc as u128 - self.w as u128);
        Decision {
            verdict: Verdict::Reject,
            remaining,
            retry_after: Nanos(retry),
            reset_after,
        }
    }

    /// The whole step: the decision and the new `ahead` when admitted.
    #[inline(always)]
    fn decide(&self, ahead: u128, cost: u64) -> (Decision, Option<u64>) {
        match self.fits(ahead, cost) {
            Some(new) => (self.admitted(new, cost), Some(new)),
            None => (self.rejected(ahead, cost), None),
        }
    }

    /// `now` in units, exact.
    #[inline]
    pub(crate) fn now_units(&self, now: Nanos) -> u128 {
        now.0 as u128 * self.k.divisor() as u128
    }

    /// `now` in units modulo 2^64 (shared form).
    #[inline]
    pub(crate) fn now_units_wrapping(&self, now: Nanos) -> u64 {
        now.0.wrapping_mul(self.k.divisor())
    }

    /// Units the TAT `s` (mod 2^64) is ahead of `now_u` (mod 2^64), serial-number style.
    #[inline]
    pub(crate) const fn wrapping_ahead(s: u64, now_u: u64) -> u64 {
        let d = s.wrapping_sub(now_u);
        if d < HALF { d } else { 0 }
    }

    /// Carries `ahead` (units of `self`) into `new`: the tokens in use carry over (rounded
    /// up, so never more capacity than before), capped at an empty new bucket.
    pub(crate) fn carry(&self, ahead: u128, new: &TokenBucketConfig) -> u64 {
        let a = if ahead > self.w as u128 {
            self.w
        } else {
            ahead as u64
        };
        let scaled = (a as u128 * new.t.divisor() as u128).div_ceil(self.t.divisor() as u128);
        if scaled > new.w as u128 {
            new.w
        } else {
            scaled as u64
        }
    }
}

impl Algorithm for TokenBucketConfig {
    type State = TokenBucketState;

    fn fresh_state(&self) -> TokenBucketState {
        TokenBucketState(0)
    }

    #[inline]
    fn acquire_state(
        &self,
        state: &mut TokenBucketState,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity> {
        self.check(cost)?;
        let now_u = self.now_units(now);
        let ahead = state.0.saturating_sub(now_u);
        match self.fits(ahead, cost) {
            Some(a) => {
                if cost != 0 {
                    state.0 = now_u + a as u128;
                }
                Ok(self.admitted(a, cost))
            }
            None => Ok(self.rejected(ahead, cost)),
        }
    }

    #[inline]
    fn peek_state(
        &self,
        state: &TokenBucketState,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity> {
        self.check(cost)?;
        Ok(self
            .decide(state.0.saturating_sub(self.now_units(now)), cost)
            .0)
    }

    fn is_fresh_state(&self, state: &TokenBucketState, now: Nanos) -> bool {
        state.0 <= self.now_units(now)
    }

    fn capacity(&self) -> u64 {
        self.burst
    }
}

/// A single-owner GCRA token bucket (`&mut self`); see the [module docs](self).
pub type TokenBucket = Limiter<TokenBucketConfig>;

impl Limiter<TokenBucketConfig> {
    /// A full bucket: `rate` admissions per `per`, at most `burst` at once.
    pub const fn new(rate: u64, per: Nanos, burst: u64) -> Result<Self, ParamError> {
        match TokenBucketConfig::new(rate, per, burst) {
            Ok(algorithm) => Ok(Limiter {
                algorithm,
                state: TokenBucketState(0),
            }),
            Err(e) => Err(e),
        }
    }

    /// The lean form of [`Limiter::acquire`]: the same step and state change, returning
    /// only the fill level ([`Granted`]; `remaining` and `reset_after` on demand) or the
    /// denial. See the [module docs](self) ("Lean path").
    #[inline]
    pub fn check(&mut self, now: Nanos, cost: u64) -> Result<Granted, Denied> {
        let c = &self.algorithm;
        if !c.within_burst(cost) {
            return Err(c.too_costly(cost));
        }
        match c.step_single(&mut self.state, now, cost) {
            Ok(ahead) => Ok(Granted { ahead }),
            Err(ahead) => Err(c.denied(ahead, cost)),
        }
    }

    /// True iff [`Limiter::acquire`] would admit `cost` at `now`; consumes it when true
    /// (the same state change). A cost above the burst is `false`.
    #[inline]
    pub fn try_acquire(&mut self, now: Nanos, cost: u64) -> bool {
        let c = &self.algorithm;
        c.within_burst(cost) && c.step_single(&mut self.state, now, cost).is_ok()
    }

    /// Gives back up to `n` tokens (e.g. for a request that was not sent), never beyond full.
    pub fn refund(&mut self, now: Nanos, n: u64) {
        let now_u = self.algorithm.now_units(now);
        let ahead = self.state.0.saturating_sub(now_u);
        if ahead == 0 {
            return;
        }
        let back = n.saturating_mul(self.algorithm.t.divisor());
        self.state.0 = now_u + ahead.saturating_sub(back as u128);
    }

    /// Changes the parameters at runtime, keeping the state: the tokens in use at `now`
    /// stay in use (rounded up in the new units), capped at an empty new bucket. A smaller
    /// burst can therefore leave the bucket empty; a larger one adds free capacity.
    pub fn reconfigure(
        &mut self,
        now: Nanos,
        rate: u64,
        per: Nanos,
        burst: u64,
    ) -> Result<(), ParamError> {
        let new = TokenBucketConfig::new(rate, per, burst)?;
        let ahead = self.state.0.saturating_sub(self.algorithm.now_units(now));
        let a = self.algorithm.carry(ahead, &new);
        self.state = TokenBucketState(new.now_units(now) + a as u128);
        self.algorithm = new;
        Ok(())
    }
}

/// A lock-free token bucket shared between threads (`&self`): one `AtomicU64` and a CAS
/// loop around the same step as [`TokenBucket`]. See the [module docs](self) for the
/// horizon within which it equals the single-owner form.
#[derive(Debug)]
pub struct SharedTokenBucket {
    config: TokenBucketConfig,
    tat: AtomicU64,
}

impl SharedTokenBucket {
    /// A full bucket (for instants below `2^63 / k` ns; see [`SharedTokenBucket::reset`]).
    pub fn new(rate: u64, per: Nanos, burst: u64) -> Result<Self, ParamError> {
        Ok(Self::from_config(TokenBucketConfig::new(rate, per, burst)?))
    }
    /// A full bucket with the given parameters.
    pub fn from_config(config: TokenBucketConfig) -> Self {
        SharedTokenBucket {
            config,
            tat: AtomicU64::new(0),
        }
    }
    /// The parameters.
    pub fn config(&self) -> &TokenBucketConfig {
        &self.config
    }
    /// Makes the bucket full at `now`.
    pub fn reset(&self, now: Nanos) {
        self.tat
            .store(self.config.now_units_wrapping(now), Ordering::Relaxed);
    }

    /// Decides on `cost` tokens at `now`; consumes them when admitted.
    #[inline]
    pub fn acquire(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        let c = &self.config;
        c.check(cost)?;
        let now_u = c.now_units_wrapping(now);
        let mut s = self.tat.load(Ordering::Relaxed);
        loop {
            let ahead = TokenBucketConfig::wrapping_ahead(s, now_u);
            match c.fits(ahead as u128, cost) {
                None => return Ok(c.rejected(ahead as u128, cost)),
                Some(a) if cost == 0 => return Ok(c.admitted(a, cost)),
                Some(a) => {
                    match self.tat.compare_exchange_weak(
                        s,
                        now_u.wrapping_add(a),
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        // The decision is computed after the CAS, off its critical path.
                        Ok(_) => return Ok(c.admitted(a, cost)),
                        Err(cur) => s = cur,
                    }
                }
            }
        }
    }

    /// The lean shared step: `Ok(new ahead)` (CAS applied unless `cost == 0`) or
    /// `Err(ahead)` (nothing written). `cost ≤ burst` is checked by the caller.
    ///
    /// The first attempt is written out straight (no loop on the hot path, so the admitted
    /// path is laid out without taken jumps); a lost CAS race continues in
    /// [`SharedTokenBucket::step_retry`], out of line.
    #[inline(always)]
    fn step(&self, now: Nanos, cost: u64) -> Result<u64, u64> {
        let c = &self.config;
        let now_u = c.now_units_wrapping(now);
        let inc = cost * c.t.divisor(); // ≤ w: cost ≤ burst
        let s = self.tat.load(Ordering::Relaxed);
        let new = Self::next_word(s, now_u, inc, c.w - inc)?;
        if cost == 0 {
            return Ok(new.wrapping_sub(now_u));
        }
        match self
            .tat
            .compare_exchange_weak(s, new, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => Ok(new.wrapping_sub(now_u)),
            Err(cur) => self.step_retry(cur, now_u, inc),
        }
    }

    /// The word after admitting `inc` units at `now_u` on the word `s`, or `Err(ahead)`
    /// when it does not fit (`limit = W − inc`).
    #[inline(always)]
    const fn next_word(s: u64, now_u: u64, inc: u64, limit: u64) -> Result<u64, u64> {
        let d = s.wrapping_sub(now_u);
        // `d < 2^63`: the TAT is `d` units ahead; otherwise in the past (ahead 0), which
        // always fits (`0 ≤ limit`).
        let ahead_now = d < HALF;
        if ahead_now && d > limit {
            return Self::over_limit(d);
        }
        // On the chain from the load: one subtract (flags) and one predicted branch; the
        // new word depends on the load and `inc` only.
        Ok(if ahead_now {
            s.wrapping_add(inc)
        } else {
            now_u.wrapping_add(inc)
        })
    }

    /// `Err(ahead)`, out of line: a call to a cold function makes the over-limit branch
    /// unlikely, so the admitted path runs straight to the CAS with no taken jump (the
    /// loop's back-edge only, as in the CAS floor).
    #[cold]
    #[inline(never)]
    const fn over_limit(ahead: u64) -> Result<u64, u64> {
        Err(ahead)
    }

    /// [`SharedTokenBucket::step`] after a lost CAS race (`cost ≥ 1`), from the word `s`
    /// that won: the same step in a loop.
    #[cold]
    #[inline(never)]
    fn step_retry(&self, mut s: u64, now_u: u64, inc: u64) -> Result<u64, u64> {
        let limit = self.config.w - inc;
        loop {
            let new = Self::next_word(s, now_u, inc, limit)?;
            match self
                .tat
                .compare_exchange_weak(s, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(new.wrapping_sub(now_u)),
                Err(cur) => s = cur,
            }
        }
    }

    /// The lean form of [`SharedTokenBucket::acquire`]: the same step and state change,
    /// returning only the fill level ([`Granted`]; `remaining` and `reset_after` on demand)
    /// or the denial. See the [module docs](self) ("Lean path").
    #[inline]
    pub fn check(&self, now: Nanos, cost: u64) -> Result<Granted, Denied> {
        let c = &self.config;
        if !c.within_burst(cost) {
            return Err(c.too_costly(cost));
        }
        match self.step(now, cost) {
            Ok(ahead) => Ok(Granted { ahead }),
            Err(ahead) => Err(c.denied(ahead as u128, cost)),
        }
    }

    /// True iff [`SharedTokenBucket::acquire`] would admit `cost` at `now`; consumes it
    /// when true (the same state change). A cost above the burst is `false`.
    #[inline]
    pub fn try_acquire(&self, now: Nanos, cost: u64) -> bool {
        self.config.within_burst(cost) && self.step(now, cost).is_ok()
    }

    /// The decision [`SharedTokenBucket::acquire`] would return now, consuming nothing.
    pub fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        let c = &self.config;
        c.check(cost)?;
        let s = self.tat.load(Ordering::Relaxed);
        let ahead = TokenBucketConfig::wrapping_ahead(s, c.now_units_wrapping(now));
        Ok(c.decide(ahead as u128, cost).0)
    }

    /// Gives back up to `n` tokens, never beyond full.
    pub fn refund(&self, now: Nanos, n: u64) {
        let c = &self.config;
        let now_u = c.now_units_wrapping(now);
        let back = n.saturating_mul(c.t.divisor());
        let _ = self
            .tat
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                let ahead = TokenBucketConfig::wrapping_ahead(s, now_u);
                (ahead != 0).then(|| now_u.wrapping_add(ahead.saturating_sub(back)))
            });
    }

    /// True when the bucket is full at `now`.
    pub fn is_fresh(&self, now: Nanos) -> bool {
        let s = self.tat.load(Ordering::Relaxed);
        TokenBucketConfig::wrapping_ahead(s, self.config.now_units_wrapping(now)) == 0
    }

    /// Changes the parameters, keeping the state as [`TokenBucket::reconfigure`] does.
    /// Takes `&mut self`: to swap parameters under live traffic, build a new bucket with
    /// [`SharedTokenBucket::reconfigured`] and publish it (e.g. with an `ArcSwap`).
    pub fn reconfigure(
        &mut self,
        now: Nanos,
        rate: u64,
        per: Nanos,
        burst: u64,
    ) -> Result<(), ParamError> {
        let new = self.reconfigured(now, rate, per, burst)?;
        *self = new;
        Ok(())
    }

    /// A new bucket with new parameters carrying this one's state at `now`.
    pub fn reconfigured(
        &self,
        now: Nanos,
        rate: u64,
        per: Nanos,
        burst: u64,
    ) -> Result<Self, ParamError> {
        let new = TokenBucketConfig::new(rate, per, burst)?;
        let c = &self.config;
        let s = self.tat.load(Ordering::Relaxed);
        let ahead = TokenBucketConfig::wrapping_ahead(s, c.now_units_wrapping(now));
        let a = c.carry(ahead as u128, &new);
        Ok(SharedTokenBucket {
            tat: AtomicU64::new(new.now_units_wrapping(now).wrapping_add(a)),
            config: new,
        })
    }

    /// The raw state word (TAT in units, mod 2^64), for tests and diagnostics.
    pub fn raw_state(&self) -> u64 {
        self.tat.load(Ordering::Relaxed)
    }

    /// Decides events `0..len` in order, as `acquire(event(i))` would one by one, and
    /// hands each outcome to `write(i, ..)`: the verdict, `remaining` and `retry_after` of
    /// `acquire`'s [`Decision`] (not `reset_after`; `delay` is always zero), or its
    /// [`InsufficientCapacity`].
    ///
    /// Runs [`BATCH`] events at a time on a local copy of the state and commits each batch
    /// with one CAS; see the [module docs](self) ("Batches") and [`crate::batch`]. When a
    /// commit fails, the batch is decided again per event, so `event` and `write` may be
    /// called more than once for an index: the last `write` for an index is its outcome,
    /// and `event` must return the same event each time. A committed batch is atomic with
    /// respect to other calls on this bucket; a redone one is as atomic as `acquire` per
    /// event.
    #[inline]
    pub fn acquire_batch<E: Events, W: Outcomes>(&self, len: usize, event: E, write: W) {
        run_batches(
            &self.tat,
            len,
            event,
            write,
            |s0, a, b, event, write| self.config.run_local(s0, a, b, event, write),
            |now, cost| self.acquire(now, cost),
        );
    }
}

impl TokenBucketConfig {
    /// Events `a..b` on the local state word `s` (shared-form semantics: wrapping `now·k`,
    /// serial-number reads); returns the new word and whether any event admitted a cost
    /// (wrote the word). Branch-free per event apart from the (never taken, for a validated
    /// trace) cost check.
    #[inline(always)]
    fn run_local<E: Events, W: Outcomes>(
        &self,
        mut s: u64,
        a: usize,
        b: usize,
        event: &mut E,
        write: &mut W,
    ) -> (u64, bool) {
        let (k, t, w) = (self.k.divisor(), self.t, self.w);
        let mut wrote = false;
        for i in a..b {
            let (now, cost) = event(i);
            if cost > self.burst {
                write(
                    i,
                    Err(InsufficientCapacity {
                        cost,
                        capacity: self.burst,
                    }),
                );
                continue;
            }
            let now_u = now.0.wrapping_mul(k);
            let d = s.wrapping_sub(now_u);
            let ahead = if d < HALF { d } else { 0 };
            // ahead < 2^63 and inc ≤ W ≤ 2^62: no overflow.
            let need = ahead + cost * t.divisor();
            let fits = need <= w;
            let write_now = fits & (cost != 0);
            wrote |= write_now;
            s = if write_now {
                now_u.wrapping_add(need)
            } else {
                s
            };
            // `remaining` is ⌊(W − ahead after) / T⌋, 0 beyond W (a rewind); `retry_after`
            // is ⌈(need − W) / k⌉ ns, 0 when it fits. Both numerators are below 2^63.
            let after = if fits { need } else { ahead };
            let remaining = t.div_lt_half(w.saturating_sub(after));
            let retry = self.k.div_ceil_lt_half(need.saturating_sub(w));
            write(
                i,
                Ok(BatchDecision {
                    allowed: fits,
                    remaining,
                    retry_after: Nanos(retry),
                    delay: Nanos::ZERO,
                }),
            );
        }
        (s, wrote)
    }
}

impl BatchAcquire for SharedTokenBucket {
    #[inline]
    fn acquire_batch<E: Events, W: Outcomes>(&self, len: usize, event: E, write: W) {
        SharedTokenBucket::acquire_batch(self, len, event, write);
    }
}

impl SharedRateLimiter for SharedTokenBucket {
    #[inline]
    fn acquire(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        SharedTokenBucket::acquire(self, now, cost)
    }
    fn peek(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        SharedTokenBucket::peek(self, now, cost)
    }
    fn is_fresh(&self, now: Nanos) -> bool {
        SharedTokenBucket::is_fresh(self, now)
    }
    fn capacity(&self) -> u64 {
        self.config.burst
    }
}

/// An admission by the lean path ([`SharedTokenBucket::check`], [`TokenBucket::check`]):
/// how far the bucket's TAT is ahead of `now` right after (in units of `1/k` ns, at most
/// `burst · T`). `remaining` and `reset_after` are computed from it on demand, exactly as
/// `acquire` would have; pass the configuration of the bucket that granted it (another
/// configuration gives meaningless but non-panicking figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Granted {
    ahead: u64,
}

impl Granted {
    /// Units the TAT is ahead of `now` after the admission (0: the bucket is full).
    pub const fn ahead_units(self) -> u64 {
        self.ahead
    }
    /// [`Decision::remaining`] of the equivalent `acquire`.
    #[inline]
    pub fn remaining(self, config: &TokenBucketConfig) -> u64 {
        config.levels(self.ahead as u128).0
    }
    /// [`Decision::reset_after`] of the equivalent `acquire`.
    #[inline]
    pub fn reset_after(self, config: &TokenBucketConfig) -> Nanos {
        config.levels(self.ahead as u128).1
    }
    /// The whole [`Decision`] the equivalent `acquire` returns.
    pub fn decision(self, config: &TokenBucketConfig) -> Decision {
        let (remaining, reset_after) = config.levels(self.ahead as u128);
        Decision {
            verdict: Verdict::Admit,
            remaining,
            retry_after: Nanos::ZERO,
            reset_after,
        }
    }
}

/// A denial by the lean path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Denied {
    /// The cost does not fit now; it fits after this long (rounded up to whole ns,
    /// saturating at [`Nanos::MAX`]) unless something else consumes meanwhile: the
    /// `retry_after` of the equivalent `acquire`. Nothing was consumed.
    RetryAfter(Nanos),
    /// The cost exceeds the burst: it never fits (`acquire`'s error).
    InsufficientCapacity(InsufficientCapacity),
}

impl Denied {
    /// The wait before retrying; [`Nanos::MAX`] for [`Denied::InsufficientCapacity`].
    pub const fn retry_after(self) -> Nanos {
        match self {
            Denied::RetryAfter(d) => d,
            Denied::InsufficientCapacity(_) => Nanos::MAX,
        }
    }
}

/// The shared form's word: `TAT mod 2^64` in units, read serial-number style. The step
/// is [`SharedTokenBucket::acquire`]'s (the generic stores and the keyed table use it).
impl WordStep for TokenBucketConfig {
    #[inline(always)]
    fn now_word(&self, now: Nanos) -> u64 {
        self.now_units_wrapping(now)
    }
    #[inline(always)]
    fn check_cost(&self, cost: u64) -> Result<(), InsufficientCapacity> {
        self.check(cost)
    }
    #[inline(always)]
    fn step_word(&self, word: u64, now_w: u64, cost: u64) -> (Decision, Option<u64>) {
        let ahead = Self::wrapping_ahead(word, now_w);
        match self.fits(ahead as u128, cost) {
            Some(a) if cost != 0 => (self.admitted(a, cost), Some(now_w.wrapping_add(a))),
            Some(a) => (self.admitted(a, cost), None),
            None => (self.rejected(ahead as u128, cost), None),
        }
    }
    #[inline]
    fn is_fresh_word(&self, word: u64, now_w: u64) -> bool {
        Self::wrapping_ahead(word, now_w) == 0
    }
    /// `now_w` itself (a TAT at now reads as full), stepped back one unit past `avoid`
    /// and the sentinel.
    fn fresh_word(&self, now_w: u64, avoid: u64) -> u64 {
        let mut f = now_w;
        if f == avoid {
            f = f.wrapping_sub(1);
        }
        if f == u64::MAX {
            f = f.wrapping_sub(1);
            if f == avoid {
                f = f.wrapping_sub(1);
            }
        }
        f
    }
    /// TAT = max(TAT, now) + cost·T, capped at an empty bucket (or where it already was).
    fn charge_word(&self, word: u64, now_w: u64, cost: u64) -> u64 {
        let ahead = Self::wrapping_ahead(word, now_w);
        let a = ahead
            .saturating_add(cost.saturating_mul(self.t.divisor()))
            .min(self.w.max(ahead));
        now_w.wrapping_add(a)
    }
    /// One unit (1/k ns) later: a TAT later by one unit never grants more.
    fn off_sentinel(&self, word: u64) -> u64 {
        word.wrapping_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::RateLimiter;

    const S: u64 = 1_000_000_000;

    #[test]
    fn config_validation() {
        assert_eq!(
            TokenBucketConfig::new(0, Nanos(1), 1),
            Err(ParamError::Zero("rate"))
        );
        assert_eq!(
            TokenBucketConfig::new(1, Nanos(0), 1),
            Err(ParamError::Zero("per"))
        );
        assert_eq!(
            TokenBucketConfig::new(1, Nanos(1), 0),
            Err(ParamError::Zero("burst"))
        );
        assert!(matches!(
            TokenBucketConfig::new(1, Nanos::MAX, 2),
            Err(ParamError::TooLarge(_))
        ));
        assert!(TokenBucketConfig::new(u64::MAX, Nanos(1), 1).is_ok());
        assert!(TokenBucketConfig::new(u64::MAX, Nanos::MAX, u64::MAX).is_err());
    }

    #[test]
    fn three_per_second_is_exact_for_a_long_time() {
        let mut tb = TokenBucket::new(3, Nanos(S), 2).unwrap();
        let shared = SharedTokenBucket::new(3, Nanos(S), 2).unwrap();
        // Poll every ~1/7 s for 1000 s: exactly the burst + ⌊3·t⌋.
        let mut admitted = 0u64;
        let mut t = 0u64;
        let mut last = 0;
        while t <= if cfg!(miri) { 20 } else { 1000 } * S {
            let a = tb.acquire(Nanos(t), 1).unwrap();
            let b = shared.acquire(Nanos(t), 1).unwrap();
            assert_eq!(a, b);
            admitted += a.is_allowed() as u64;
            last = t;
            t += S / 7;
        }
        assert_eq!(admitted, 2 + 3 * last / S);
    }

    #[test]
    fn decisions_fields() {
        let mut tb = TokenBucket::new(2, Nanos(S), 4).unwrap();
        let d = tb.peek(Nanos(0), 0).unwrap();
        assert_eq!((d.remaining, d.reset_after), (4, Nanos::ZERO));
        let d = tb.acquire(Nanos(0), 3).unwrap();
        assert_eq!(d.verdict, Verdict::Admit);
        assert_eq!(d.remaining, 1);
        assert_eq!(d.reset_after, Nanos(S / 2));
        let d = tb.acquire(Nanos(0), 2).unwrap();
        assert_eq!(d.verdict, Verdict::Reject);
        assert_eq!(d.retry_after, Nanos(S / 2));
        assert_eq!(d.remaining, 1);
        assert!(tb.acquire(Nanos(S / 2), 2).unwrap().is_allowed());
        assert_eq!(
            tb.acquire(Nanos(0), 5),
            Err(InsufficientCapacity {
                cost: 5,
                capacity: 4
            })
        );
        assert!(!tb.is_fresh(Nanos(2 * S)));
        assert!(tb.is_fresh(Nanos(5 * S / 2)));
    }

    #[test]
    fn refund_and_rewind() {
        let mut tb = TokenBucket::new(1, Nanos(S), 2).unwrap();
        tb.acquire(Nanos(10 * S), 2).unwrap();
        tb.refund(Nanos(10 * S), 5);
        assert_eq!(tb.peek(Nanos(10 * S), 0).unwrap().remaining, 2);
        tb.acquire(Nanos(10 * S), 2).unwrap();
        // Rewind: never more tokens than at the latest instant.
        let d = tb.peek(Nanos(0), 1).unwrap();
        assert_eq!(d.verdict, Verdict::Reject);
        assert_eq!(d.remaining, 0);
        assert!(d.retry_after >= Nanos(S));
        let s = SharedTokenBucket::new(1, Nanos(S), 2).unwrap();
        s.acquire(Nanos(10 * S), 2).unwrap();
        s.refund(Nanos(10 * S), 1);
        assert_eq!(s.peek(Nanos(10 * S), 0).unwrap().remaining, 1);
        assert_eq!(s.peek(Nanos(0), 1).unwrap().verdict, Verdict::Reject);
    }

    #[test]
    fn reconfigure_carries_used_tokens() {
        let mut tb = TokenBucket::new(1, Nanos(S), 10).unwrap();
        tb.acquire(Nanos(0), 4).unwrap();
        tb.reconfigure(Nanos(0), 10, Nanos(S), 20).unwrap();
        assert_eq!(tb.peek(Nanos(0), 0).unwrap().remaining, 16);
        tb.reconfigure(Nanos(0), 10, Nanos(S), 3).unwrap();
        assert_eq!(tb.peek(Nanos(0), 0).unwrap().remaining, 0);
        let mut s = SharedTokenBucket::new(1, Nanos(S), 10).unwrap();
        s.acquire(Nanos(0), 4).unwrap();
        s.reconfigure(Nanos(0), 10, Nanos(S), 20).unwrap();
        assert_eq!(s.peek(Nanos(0), 0).unwrap().remaining, 16);
        assert!(tb.reconfigure(Nanos(0), 0, Nanos(S), 3).is_err());
    }

    /// Outcomes of up to 600 events.
    type Outcomes = [Option<Result<BatchDecision, InsufficientCapacity>>; 600];

    /// `acquire_batch` over `events` on a fresh bucket `(r, p, b)` with state `start`:
    /// the outcomes and the final word, next to per-event `acquire` on a twin.
    fn batch_vs_each(
        (r, p, b): (u64, u64, u64),
        start: u64,
        events: &[(u64, u64)],
    ) -> (Outcomes, Outcomes) {
        let batch = SharedTokenBucket::new(r, Nanos(p), b).unwrap();
        let each = SharedTokenBucket::new(r, Nanos(p), b).unwrap();
        batch.tat.store(start, Ordering::Relaxed);
        each.tat.store(start, Ordering::Relaxed);
        let mut got = [None; 600];
        let mut want = [None; 600];
        batch.acquire_batch(
            events.len(),
            |i| (Nanos(events[i].0), events[i].1),
            |i, d| got[i] = Some(d),
        );
        for (i, &(t, c)) in events.iter().enumerate() {
            want[i] = Some(each.acquire(Nanos(t), c).map(BatchDecision::from));
        }
        assert_eq!(batch.raw_state(), each.raw_state());
        (got, want)
    }

    #[test]
    fn batch_equals_acquire_per_event() {
        // Longer than two batches; rewinds, cost 0, the burst, above the burst, u64
        // extremes of time, non-integral emission intervals and a huge k.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for cfg in [
            (3u64, S, 5u64),
            (5000, S, 100),
            (1_000_000_007, S, 1000),
            (u64::MAX, 1, 1),
            (1, 1, 1 << 62),
            (7, 3, 2),
        ] {
            for start in [0, u64::MAX, HALF, HALF - 1, 12345] {
                let mut t = 0u64;
                let mut events = [(0u64, 0u64); 600];
                for e in events.iter_mut() {
                    let r = next();
                    t = match r % 16 {
                        0 => t.saturating_sub(r >> 40),
                        1 => [0, u64::MAX, u64::MAX / 2, r][(r >> 8) as usize % 4],
                        _ => t.saturating_add((r >> 20) % (2 * cfg.1 / cfg.0.min(cfg.1) + 2)),
                    };
                    let cost = match (r >> 4) % 8 {
                        0 => 0,
                        1 => cfg.2,
                        2 => cfg.2.saturating_add(1),
                        _ => 1,
                    };
                    *e = (t, cost);
                }
                let (got, want) = batch_vs_each(cfg, start, &events);
                assert_eq!(got, want, "{cfg:?} from {start}");
            }
        }
    }

    #[test]
    fn batch_commit_lost_to_a_concurrent_writer_is_redone() {
        // The first outcome written makes another call consume from the bucket (as a
        // concurrent thread would between the batch's load and its CAS): the CAS fails
        // and the batch is decided again after that call, per event.
        let tb = SharedTokenBucket::new(1, Nanos(S), 3).unwrap();
        let mut interfered = false;
        let mut got = [None; 4];
        tb.acquire_batch(
            4,
            |_| (Nanos(0), 1),
            |i, d| {
                if !interfered {
                    interfered = true;
                    assert!(tb.acquire(Nanos(0), 1).unwrap().is_allowed());
                }
                got[i] = Some(d.unwrap());
            },
        );
        let twin = SharedTokenBucket::new(1, Nanos(S), 3).unwrap();
        twin.acquire(Nanos(0), 1).unwrap();
        for (i, g) in got.iter().enumerate() {
            let want = BatchDecision::from(twin.acquire(Nanos(0), 1).unwrap());
            assert_eq!(*g, Some(want), "event {i}");
        }
        assert_eq!(tb.raw_state(), twin.raw_state());
        // Nothing admitted: no write, no CAS.
        let before = tb.raw_state();
        tb.acquire_batch(2, |_| (Nanos(0), 1), |_, d| assert!(!d.unwrap().allowed));
        assert_eq!(tb.raw_state(), before);
        tb.acquire_batch(0, |_| (Nanos(0), 1), |_, _| unreachable!());
    }

    #[test]
    fn batch_whose_word_comes_back_still_commits_by_cas() {
        // T = W = 2^62 units (k = 1): admitting at 0 moves the word 0 → 2^62; admitting at
        // 3·2^62 reads it as past and moves it to 3·2^62 + 2^62 = 0, the word the batch
        // loaded. A concurrent admission in between must still fail the commit.
        let per = Nanos(1 << 62);
        let events = [(Nanos(0), 1), (Nanos(3 << 62), 1)];
        let tb = SharedTokenBucket::new(1, per, 1).unwrap();
        let mut interfered = false;
        let mut got = [None; 2];
        tb.acquire_batch(
            2,
            |i| events[i],
            |i, d| {
                if !interfered {
                    interfered = true;
                    assert!(tb.acquire(Nanos(0), 1).unwrap().is_allowed());
                }
                got[i] = Some(d.unwrap());
            },
        );
        let twin = SharedTokenBucket::new(1, per, 1).unwrap();
        twin.acquire(Nanos(0), 1).unwrap();
        for (i, &(t, c)) in events.iter().enumerate() {
            let want = BatchDecision::from(twin.acquire(t, c).unwrap());
            assert_eq!(got[i], Some(want), "event {i}");
        }
        assert!(
            !got[0].unwrap().allowed,
            "the interfering call took the only token"
        );
        assert_eq!(tb.raw_state(), twin.raw_state());
    }

    #[test]
    fn extremes_do_not_panic() {
        for (r, p, b) in [
            (u64::MAX, 1, 1),
            (1, 1, 1 << 62),
            (1_000_000_007, S, 1000),
            (3, S, 1),
        ] {
            let mut tb = TokenBucket::new(r, Nanos(p), b).unwrap();
            let s = SharedTokenBucket::new(r, Nanos(p), b).unwrap();
            for now in [0, u64::MAX, 1, u64::MAX / 2, 0, u64::MAX] {
                for cost in [0, 1, b] {
                    let _ = tb.acquire(Nanos(now), cost);
                    let _ = s.acquire(Nanos(now), cost);
                    tb.refund(Nanos(now), u64::MAX);
                    s.refund(Nanos(now), u64::MAX);
                }
            }
            assert!(tb.capacity() == b);
        }
    }
}
