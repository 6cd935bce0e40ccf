//! A circuit breaker: CLOSED → OPEN → HALF_OPEN → CLOSED, with exponential jittered
//! cooldown, bounded probes and a gradual ramp.
//!
//! **Why.** When a backend is down, sending it every request wastes the client's latency
//! budget and keeps the backend from recovering. A breaker *trips* (OPEN) on evidence of
//! failure and answers at once (`circuit_open`, or a fallback) for a cooldown; then it lets a
//! few *probes* through (HALF_OPEN) and closes only when they succeed. Two refinements stop the
//! CLOSED→OPEN→HALF_OPEN→CLOSED thrashing seen under micro-bursts (seed 004): the cooldown
//! grows with each failed recovery, with jitter so a fleet of breakers does not probe in
//! lock-step, and after closing an optional *ramp* re-admits traffic gradually.
//!
//! **Rules** (both forms, identical decisions on one thread — checked by property tests):
//! - *Trips* (CLOSED → OPEN), any of: `consecutive_failures` failures in a row; among the last
//!   `window` calls (a count window, `window ≤ 29`), at least `min_calls` calls and a failure
//!   fraction `≥ failure_rate`; or a slow fraction `≥ slow_call.rate`, where a call is slow
//!   when its duration is *greater* than `slow_call.threshold`. Rates are integers in parts
//!   per million, compared exactly (`fails × 1e6 ≥ rate_ppm × calls`).
//! - *Cooldown.* OPEN lasts `d × (1 ± jitter)` with `d = min(max, base × multiplier^k)`
//!   (see [`Cooldown`]), drawn uniformly. `k` counts consecutive failed recoveries: a probe
//!   failure or probe timeout re-opens with `k + 1` (capped at 63). `k` resets to 0 when the
//!   breaker trips after having been CLOSED for at least `cooldown.max` — the "healthy closed
//!   period" of the contract.
//! - *HALF_OPEN.* The first call after the cooldown becomes a probe; at most `probes` probes
//!   are in flight at once; `successes` probe successes close the breaker; any probe failure
//!   re-opens it. Outcomes of non-probe calls are ignored outside CLOSED.
//! - *Unanswered probes.* A [`Ticket`] is consumed by `record_*` or [`Breaker::cancel`]; it
//!   cannot be recorded twice. A probe ticket that is dropped instead leaks its slot until
//!   `probe_timeout` after HALF_OPEN began: then the next `allow` treats the recovery as
//!   failed (HALF_OPEN → OPEN with `k + 1`), so HALF_OPEN can never wedge. Tickets carry an
//!   epoch (22 bits, bumped by every transition); a ticket from an earlier epoch is ignored.
//! - *Ramp.* For `ramp` after closing, a call is admitted with probability
//!   `elapsed / ramp` (a draw of the injected generator: `uniform[0, ramp−1] < elapsed`);
//!   refused calls are [`RejectReason::Ramp`] so the frontend answers `circuit_open`.
//! - *Clock.* An instant earlier than a stored one counts as "no time passed": OPEN stays open
//!   and a ramp stays at its start (conservative); after a rewind the cooldown therefore ends
//!   at the same stored instant.
//! - *Transitions* are returned by the call that performs them (`(at, from, to)`, `at` = that
//!   call's `now`), for timelines and `weir_breaker_transitions_total{from,to}`. Time-driven
//!   changes happen lazily on `allow`; [`Breaker::state`] reports the state `allow` would act
//!   in (OPEN past its cooldown reads `half_open`).
//!
//! **Randomness.** Jitter and ramp draws use the injected [`Rng`] (single-owner) or an
//! atomic SplitMix64 seeded by the caller (shared); a draw happens only when jitter > 0 or
//! inside a ramp, so both forms consume the same sequence.
//!
//! **Shared form.** [`SharedBreaker`] packs state, transit flag, ramp flag, consecutive
//! failures (16 bits, saturating), probes in flight (8), probe successes (8), `k` (6) and the
//! epoch (22) into one `AtomicU64`; every change is a CAS on it, so the probe cap holds under
//! any interleaving (a probe is admitted only by a CAS from `probes < cap` to `probes + 1`).
//! The instant (open-until / probe deadline / closed-at) lives in a second word, published in
//! two steps: a transition CASes the state word to the new state *with the transit flag set*,
//! stores the instant, then clears the flag. Callers that see the flag are refused
//! (conservative) and do not modify the word, so a transition is never lost or doubled. The
//! count window is a third word (failure bits, slow bits, count), updated by CAS; an outcome
//! recorded by a stale ticket racing with a close may land in the fresh window (at most one
//! per racing call — documented approximation). Closed path: `allow` is one load (no ramp);
//! `record_success` is one load plus one CAS on the window word (none without a rate rule),
//! plus a CAS only if a failure streak must be reset.

use crate::backoff::{MULTIPLIER_MAX, MULTIPLIER_ONE, exp_capped};
use crate::error::ParamError;
use crate::rng::{GAMMA, Rng, SplitMix64, mix64};
use crate::sync::{AtomicU64, Ordering};
use crate::time::Nanos;
use core::fmt;

/// Both forms' `record` (receiver `$recv self`): `record_failure` or `record_success`.
macro_rules! record {
    ($(#[$m:meta])* ($($recv:tt)+)) => {
        $(#[$m])*
        pub fn record(
            $($recv)+ self,
            t: Ticket,
            now: Nanos,
            duration: Nanos,
            failed: bool,
        ) -> Option<Transition> {
            if failed {
                self.record_failure(t, now, duration)
            } else {
                self.record_success(t, now, duration)
            }
        }
    };
}

const PPM: u64 = 1_000_000;
/// The widest count window.
pub const WINDOW_MAX: u32 = 29;
/// The most probes in flight / probe successes configurable.
pub const PROBES_MAX: u32 = 255;
/// The largest `consecutive_failures`.
pub const CONSECUTIVE_MAX: u32 = 0xFFFF;
const K_MAX: u32 = 63;
const EPOCH_MASK: u32 = (1 << 22) - 1;

/// The three states. Spelled `closed`, `open`, `half_open` everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls pass; outcomes are counted.
    Closed,
    /// Calls are refused until the cooldown ends.
    Open,
    /// A bounded number of probe calls decide between CLOSED and OPEN.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open`, `half_open`.
    pub const fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
    /// The `weir_breaker_state` gauge value: 0 closed, 1 open, 2 half-open.
    pub const fn as_gauge(self) -> u8 {
        match self {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
        }
    }
    const fn from_bits(b: u64) -> BreakerState {
        match b & 3 {
            0 => BreakerState::Closed,
            1 => BreakerState::Open,
            _ => BreakerState::HalfOpen,
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state change, reported by the call that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Transition {
    /// The `now` of the call that made it.
    pub at: Nanos,
    /// Previous state.
    pub from: BreakerState,
    /// New state.
    pub to: BreakerState,
}

/// How long OPEN lasts: `min(max, base × multiplier^k) × (1 ± jitter)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cooldown {
    /// The first OPEN's duration (before jitter).
    pub base: Nanos,
    /// The cap (before jitter); also the healthy closed period that resets `k`.
    pub max: Nanos,
    /// Growth per failed recovery, in thousandths (`2000` = ×2), `1000..=1_000_000`.
    pub multiplier_milli: u32,
    /// Jitter fraction in parts per million (`200_000` = ±20 %), `0..=1_000_000`.
    pub jitter_ppm: u32,
}

impl Cooldown {
    /// No cooldown at all: the first `allow` after a trip half-opens (tests, simulations).
    pub const NONE: Cooldown = Cooldown {
        base: Nanos(0),
        max: Nanos(0),
        multiplier_milli: MULTIPLIER_ONE,
        jitter_ppm: 0,
    };

    fn validate(&self) -> Result<(), ParamError> {
        if self.base > self.max {
            return Err(ParamError::Order {
                low: "cooldown.base",
                high: "cooldown.max",
            });
        }
        if self.multiplier_milli < MULTIPLIER_ONE || self.multiplier_milli > MULTIPLIER_MAX {
            return Err(ParamError::OutOfRange("cooldown.multiplier"));
        }
        if u64::from(self.jitter_ppm) > PPM {
            return Err(ParamError::OutOfRange("cooldown.jitter"));
        }
        Ok(())
    }

    /// The inclusive range OPEN may last after `k` failed recoveries. The jitter span is
    /// `⌊d × jitter_ppm / 1e6⌋` each side (rounded down), saturating.
    pub fn bounds(&self, k: u32) -> (Nanos, Nanos) {
        let d = exp_capped(self.base, self.max, self.multiplier_milli, k);
        let span = (u128::from(d.0) * u128::from(self.jitter_ppm) / u128::from(PPM)) as u64;
        (d.saturating_sub(Nanos(span)), d.saturating_add(Nanos(span)))
    }

    /// A duration drawn uniformly from [`bounds`](Self::bounds) (no draw when there is no
    /// jitter).
    pub fn duration(&self, k: u32, rng: &mut impl Rng) -> Nanos {
        let (lo, hi) = self.bounds(k);
        if lo == hi {
            lo
        } else {
            Nanos(lo.0 + rng.below_inclusive(hi.0 - lo.0))
        }
    }
}

/// The slow-call rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlowCall {
    /// Calls longer than this are slow.
    pub threshold: Nanos,
    /// Trip when the slow fraction of the window reaches this, in ppm (`1..=1_000_000`).
    pub rate_ppm: u32,
}

/// Breaker parameters (plain data; validated by the constructors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BreakerConfig {
    /// Trip after this many failures in a row (`1..=65535`), or never on streaks.
    pub consecutive_failures: Option<u32>,
    /// Trip when the window's failure fraction reaches this, in ppm (`1..=1_000_000`).
    pub failure_rate_ppm: Option<u32>,
    /// Trip on the window's slow-call fraction.
    pub slow_call: Option<SlowCall>,
    /// The count window for the rate rules: the last `window` calls (`1..=29`).
    pub window: u32,
    /// Rate rules apply only once the window holds this many calls (`1..=window`).
    pub min_calls: u32,
    /// How long OPEN lasts.
    pub cooldown: Cooldown,
    /// Probes in flight at once in HALF_OPEN (`1..=255`).
    pub probes: u32,
    /// Probe successes that close the breaker (`1..=255`).
    pub successes: u32,
    /// After closing, the admitted fraction rises linearly from 0 to 1 over this; zero = off.
    pub ramp: Nanos,
    /// A HALF_OPEN episode not decided this long after it began counts as a failed recovery.
    pub probe_timeout: Nanos,
}

impl Default for BreakerConfig {
    /// 5 consecutive failures; cooldown 5 s ×2 up to 60 s, ±20 %; 1 probe, 1 success; no
    /// ramp; window 20 / min 10 (for rate rules when enabled); probe timeout 60 s.
    fn default() -> Self {
        BreakerConfig {
            consecutive_failures: Some(5),
            failure_rate_ppm: None,
            slow_call: None,
            window: 20,
            min_calls: 10,
            cooldown: Cooldown {
                base: Nanos::from_secs(5),
                max: Nanos::from_secs(60),
                multiplier_milli: 2000,
                jitter_ppm: 200_000,
            },
            probes: 1,
            successes: 1,
            ramp: Nanos::ZERO,
            probe_timeout: Nanos::from_secs(60),
        }
    }
}

impl BreakerConfig {
    /// Checks every range documented on the fields.
    pub fn validate(&self) -> Result<(), ParamError> {
        if let Some(n) = self.consecutive_failures {
            if n == 0 {
                return Err(ParamError::Zero("consecutive_failures"));
            }
            if n > CONSECUTIVE_MAX {
                return Err(ParamError::OutOfRange("consecutive_failures"));
            }
        }
        let rate_ok = |r: u32| r != 0 && u64::from(r) <= PPM;
        if let Some(r) = self.failure_rate_ppm
            && !rate_ok(r)
        {
            return Err(ParamError::OutOfRange("failure_rate"));
        }
        if let Some(s) = self.slow_call
            && !rate_ok(s.rate_ppm)
        {
            return Err(ParamError::OutOfRange("slow_call_rate"));
        }
        if self.uses_window() {
            if self.window == 0 {
                return Err(ParamError::Zero("window"));
            }
            if self.window > WINDOW_MAX {
                return Err(ParamError::OutOfRange("window"));
            }
            if self.min_calls == 0 {
                return Err(ParamError::Zero("min_calls"));
            }
            if self.min_calls > self.window {
                return Err(ParamError::Order {
                    low: "min_calls",
                    high: "window",
                });
            }
        }
        self.cooldown.validate()?;
        for (v, name) in [(self.probes, "probes"), (self.successes, "successes")] {
            if v == 0 {
                return Err(ParamError::Zero(name));
            }
            if v > PROBES_MAX {
                return Err(ParamError::OutOfRange(name));
            }
        }
        if self.probe_timeout.is_zero() {
            return Err(ParamError::Zero("probe_timeout"));
        }
        Ok(())
    }

    const fn uses_window(&self) -> bool {
        self.failure_rate_ppm.is_some() || self.slow_call.is_some()
    }

    #[inline]
    fn is_slow(&self, duration: Nanos) -> bool {
        matches!(self.slow_call, Some(s) if duration > s.threshold)
    }

    /// Does the window (after a push) trip a rate rule?
    #[inline]
    fn window_trips(&self, w: u64) -> bool {
        let calls = w >> W_COUNT_SHIFT;
        if calls < u64::from(self.min_calls) {
            return false;
        }
        let fails = u64::from((w & W_BITS).count_ones());
        let slows = u64::from(((w >> W_SLOW_SHIFT) & W_BITS).count_ones());
        matches!(self.failure_rate_ppm, Some(r) if fails * PPM >= u64::from(r) * calls)
            || matches!(self.slow_call, Some(s) if slows * PPM >= u64::from(s.rate_ppm) * calls)
    }

    /// Can pushing a *success* (slow or not) onto `prior` make a rate rule trip? Only if the
    /// window had fewer than `min_calls` calls (then `prior` was never evaluated) or the call
    /// is slow: otherwise neither fraction can grow, and `prior` did not trip.
    #[inline]
    fn success_may_trip(&self, prior: u64, slow: bool) -> bool {
        slow || (prior >> W_COUNT_SHIFT) < u64::from(self.min_calls)
    }

    #[inline]
    fn push(&self, w: u64, failed: bool, slow: bool) -> u64 {
        let mask = (1u64 << self.window) - 1;
        let fails = (((w & W_BITS) << 1) | u64::from(failed)) & mask;
        let slows = ((((w >> W_SLOW_SHIFT) & W_BITS) << 1) | u64::from(slow)) & mask;
        let count = ((w >> W_COUNT_SHIFT) + 1).min(u64::from(self.window));
        fails | (slows << W_SLOW_SHIFT) | (count << W_COUNT_SHIFT)
    }

    /// Whether `now` is inside the ramp that began at `closed_at`, and the admission draw.
    #[inline]
    fn ramp_admits(&self, now: Nanos, closed_at: Nanos, rng: &mut impl Rng) -> Option<bool> {
        let elapsed = now.saturating_sub(closed_at);
        if elapsed >= self.ramp {
            None // ramp over
        } else {
            Some(rng.below_inclusive(self.ramp.0 - 1) < elapsed.0)
        }
    }

    /// `k` for a trip from CLOSED that began at `closed_at`: reset after a healthy period.
    #[inline]
    fn k_after_closed(&self, k: u32, closed_at: Nanos, now: Nanos) -> u32 {
        if now >= closed_at.saturating_add(self.cooldown.max) {
            0
        } else {
            k
        }
    }
}

const W_BITS: u64 = (1 << WINDOW_MAX) - 1;
const W_SLOW_SHIFT: u32 = WINDOW_MAX;
const W_COUNT_SHIFT: u32 = 2 * WINDOW_MAX;

/// Permission to make one call; give it back with `record_success`, `record_failure` or
/// `cancel`. Not `Clone`: an outcome is recorded at most once.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "record the outcome (or cancel) so a probe slot is not held until probe_timeout"]
pub struct Ticket {
    epoch: u32,
    probe: bool,
}

impl Ticket {
    /// True for a HALF_OPEN probe.
    pub const fn is_probe(&self) -> bool {
        self.probe
    }
}

/// An admitted call.
#[derive(Debug, PartialEq, Eq)]
pub struct Admitted {
    /// Record the call's outcome with it.
    pub ticket: Ticket,
    /// The transition this `allow` made (OPEN → HALF_OPEN), if any.
    pub transition: Option<Transition>,
}

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// OPEN (cooldown running).
    Open,
    /// HALF_OPEN with all probe slots taken.
    HalfOpenFull,
    /// CLOSED, but not admitted by the ramp.
    Ramp,
}

/// A refused call: answer `circuit_open` (or the fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rejected {
    /// Why.
    pub reason: RejectReason,
    /// Open: time until the cooldown ends. HalfOpenFull: upper bound (until the probe
    /// timeout). Ramp: zero (the next call may pass).
    pub retry_after: Nanos,
    /// The transition this `allow` made (HALF_OPEN → OPEN on probe timeout), if any.
    pub transition: Option<Transition>,
}

/// The answer of `allow`.
pub type Admission = Result<Admitted, Rejected>;

const fn tr(at: Nanos, from: BreakerState, to: BreakerState) -> Option<Transition> {
    Some(Transition { at, from, to })
}

fn reject(reason: RejectReason, retry_after: Nanos, transition: Option<Transition>) -> Admission {
    Err(Rejected {
        reason,
        retry_after,
        transition,
    })
}

fn admit(epoch: u32, probe: bool, transition: Option<Transition>) -> Admission {
    Ok(Admitted {
        ticket: Ticket { epoch, probe },
        transition,
    })
}

/// The single-owner breaker (`&mut self`). Owns its jitter/ramp generator.
///
/// ```
/// use weir_core::{Breaker, BreakerConfig, BreakerState, Cooldown, Nanos, SplitMix64};
/// let cfg = BreakerConfig {
///     consecutive_failures: Some(2),
///     cooldown: Cooldown { base: Nanos(100), max: Nanos(1000), multiplier_milli: 2000, jitter_ppm: 0 },
///     ..BreakerConfig::default()
/// };
/// let mut b = Breaker::new(cfg, SplitMix64::new(1)).unwrap();
/// for _ in 0..2 {
///     let t = b.allow(Nanos(0)).unwrap().ticket;
///     b.record_failure(t, Nanos(0), Nanos(5));
/// }
/// assert_eq!(b.state(Nanos(0)), BreakerState::Open);
/// let r = b.allow(Nanos(40)).unwrap_err();
/// assert_eq!(r.retry_after, Nanos(60));
/// // after the cooldown the next call is a probe
/// let probe = b.allow(Nanos(100)).unwrap();
/// assert!(probe.ticket.is_probe());
/// let t = b.record_success(probe.ticket, Nanos(110), Nanos(10)).unwrap();
/// assert_eq!((t.from, t.to), (BreakerState::HalfOpen, BreakerState::Closed));
/// ```
#[derive(Debug, Clone)]
pub struct Breaker<R: Rng = SplitMix64> {
    cfg: BreakerConfig,
    rng: R,
    state: BreakerState,
    ramping: bool,
    epoch: u32,
    consec: u32,
    probes: u32,
    succ: u32,
    k: u32,
    /// OPEN: open-until; HALF_OPEN: probe deadline; CLOSED: closed-at.
    at: Nanos,
    window: u64,
}

impl<R: Rng> Breaker<R> {
    /// A CLOSED breaker (no ramp at start).
    pub fn new(cfg: BreakerConfig, rng: R) -> Result<Self, ParamError> {
        cfg.validate()?;
        Ok(Breaker {
            cfg,
            rng,
            state: BreakerState::Closed,
            ramping: false,
            epoch: 0,
            consec: 0,
            probes: 0,
            succ: 0,
            k: 0,
            at: Nanos::ZERO,
            window: 0,
        })
    }

    /// The parameters.
    pub fn config(&self) -> &BreakerConfig {
        &self.cfg
    }

    /// Failed recoveries counted so far (the cooldown exponent).
    pub fn failed_recoveries(&self) -> u32 {
        self.k
    }

    /// Probes currently in flight.
    pub fn probes_in_flight(&self) -> u32 {
        self.probes
    }

    /// The state the next `allow` at `now` acts in.
    pub fn state(&self, now: Nanos) -> BreakerState {
        effective(self.state, self.at, now)
    }

    /// May a call go ahead now?
    pub fn allow(&mut self, now: Nanos) -> Admission {
        match self.state {
            BreakerState::Closed => {
                if self.ramping {
                    match self.cfg.ramp_admits(now, self.at, &mut self.rng) {
                        None => self.ramping = false,
                        Some(true) => {}
                        Some(false) => return reject(RejectReason::Ramp, Nanos::ZERO, None),
                    }
                }
                admit(self.epoch, false, None)
            }
            BreakerState::Open => {
                if now < self.at {
                    return reject(RejectReason::Open, self.at - now, None);
                }
                self.next_epoch(BreakerState::HalfOpen);
                self.probes = 1;
                self.at = now.saturating_add(self.cfg.probe_timeout);
                admit(
                    self.epoch,
                    true,
                    tr(now, BreakerState::Open, BreakerState::HalfOpen),
                )
            }
            BreakerState::HalfOpen => {
                if now >= self.at {
                    let t = self.open(now, self.k.saturating_add(1), BreakerState::HalfOpen);
                    return reject(RejectReason::Open, self.at - now, t);
                }
                if self.probes < self.cfg.probes {
                    self.probes += 1;
                    admit(self.epoch, true, None)
                } else {
                    reject(RejectReason::HalfOpenFull, self.at - now, None)
                }
            }
        }
    }

    /// Records a successful call of `duration` (slow calls count towards the slow rule).
    pub fn record_success(&mut self, t: Ticket, now: Nanos, duration: Nanos) -> Option<Transition> {
        if t.epoch != self.epoch {
            return None;
        }
        match (self.state, t.probe) {
            (BreakerState::HalfOpen, true) => {
                self.probes = self.probes.saturating_sub(1);
                self.succ += 1;
                if self.succ >= self.cfg.successes {
                    self.next_epoch(BreakerState::Closed);
                    self.at = now;
                    self.window = 0;
                    self.ramping = !self.cfg.ramp.is_zero();
                    return tr(now, BreakerState::HalfOpen, BreakerState::Closed);
                }
                None
            }
            (BreakerState::Closed, false) => {
                self.consec = 0;
                if self.cfg.uses_window() {
                    self.window = self
                        .cfg
                        .push(self.window, false, self.cfg.is_slow(duration));
                    if self.cfg.window_trips(self.window) {
                        return self.trip(now);
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// Records a failed call.
    pub fn record_failure(&mut self, t: Ticket, now: Nanos, duration: Nanos) -> Option<Transition> {
        if t.epoch != self.epoch {
            return None;
        }
        match (self.state, t.probe) {
            (BreakerState::HalfOpen, true) => {
                self.open(now, self.k.saturating_add(1), BreakerState::HalfOpen)
            }
            (BreakerState::Closed, false) => {
                self.consec = (self.consec + 1).min(CONSECUTIVE_MAX);
                let mut trips =
                    matches!(self.cfg.consecutive_failures, Some(n) if self.consec >= n);
                if self.cfg.uses_window() {
                    self.window = self.cfg.push(self.window, true, self.cfg.is_slow(duration));
                    trips |= self.cfg.window_trips(self.window);
                }
                if trips { self.trip(now) } else { None }
            }
            _ => None,
        }
    }

    record!(
        /// Records `failed` or not: a shorthand for the two `record_*`.
        (&mut)
    );

    /// Gives the ticket back without an outcome (the call was not made or its result is not
    /// evidence either way); frees a probe slot.
    pub fn cancel(&mut self, t: Ticket) {
        if t.probe && t.epoch == self.epoch && self.state == BreakerState::HalfOpen {
            self.probes = self.probes.saturating_sub(1);
        }
    }

    fn next_epoch(&mut self, to: BreakerState) {
        self.epoch = (self.epoch + 1) & EPOCH_MASK;
        self.state = to;
        self.consec = 0;
        self.probes = 0;
        self.succ = 0;
        self.ramping = false;
    }

    fn trip(&mut self, now: Nanos) -> Option<Transition> {
        let k = self.cfg.k_after_closed(self.k, self.at, now);
        self.open(now, k, BreakerState::Closed)
    }

    fn open(&mut self, now: Nanos, k: u32, from: BreakerState) -> Option<Transition> {
        self.next_epoch(BreakerState::Open);
        self.k = k.min(K_MAX);
        self.at = now.saturating_add(self.cfg.cooldown.duration(self.k, &mut self.rng));
        tr(now, from, BreakerState::Open)
    }
}

const fn effective(state: BreakerState, at: Nanos, now: Nanos) -> BreakerState {
    match state {
        BreakerState::Open if now.0 >= at.0 => BreakerState::HalfOpen,
        BreakerState::HalfOpen if now.0 >= at.0 => BreakerState::Open,
        s => s,
    }
}

// ---- shared form -------------------------------------------------------------------------

const ST_MASK: u64 = 0b11;
const TRANSIT: u64 = 1 << 2;
const RAMPING: u64 = 1 << 3;
const CONSEC_SHIFT: u32 = 4;
const PROBES_SHIFT: u32 = 20;
const SUCC_SHIFT: u32 = 28;
const K_SHIFT: u32 = 36;
const EPOCH_SHIFT: u32 = 42;
const CONSEC_FIELD: u64 = 0xFFFF << CONSEC_SHIFT;
const PROBE_ONE: u64 = 1 << PROBES_SHIFT;
const SUCC_ONE: u64 = 1 << SUCC_SHIFT;

#[inline]
const fn w_state(w: u64) -> BreakerState {
    BreakerState::from_bits(w)
}
#[inline]
const fn w_epoch(w: u64) -> u32 {
    (w >> EPOCH_SHIFT) as u32
}
/// The word's counter fields: `name(w)` is `(w >> SHIFT) & MASK`.
macro_rules! w_fields {
    ($($name:ident = $shift:ident & $mask:literal;)*) => {$(
        #[inline]
        const fn $name(w: u64) -> u32 {
            ((w >> $shift) & $mask) as u32
        }
    )*};
}
w_fields! {
    w_consec = CONSEC_SHIFT & 0xFFFF;
    w_probes = PROBES_SHIFT & 0xFF;
    w_succ = SUCC_SHIFT & 0xFF;
    w_k = K_SHIFT & 0x3F;
}
/// A fresh word for `state` in the epoch after `w`'s, keeping nothing but `k`.
#[inline]
const fn w_next(w: u64, state: BreakerState, k: u32) -> u64 {
    let epoch = (w_epoch(w) + 1) & EPOCH_MASK;
    let s = match state {
        BreakerState::Closed => 0,
        BreakerState::Open => 1,
        BreakerState::HalfOpen => 2,
    };
    s | ((k as u64) << K_SHIFT) | ((epoch as u64) << EPOCH_SHIFT)
}

/// An [`Rng`] view of an atomic SplitMix64 state: `fetch_add(GAMMA)` then `mix64`, so a
/// single thread draws exactly the sequence of [`SplitMix64`] with the same seed.
struct AtomicDraw<'a>(&'a AtomicU64);

impl Rng for AtomicDraw<'_> {
    fn next_u64(&mut self) -> u64 {
        mix64(
            self.0
                .fetch_add(GAMMA, Ordering::Relaxed)
                .wrapping_add(GAMMA),
        )
    }
}

/// The lock-free shared breaker (`&self`). Same decisions as [`Breaker`] with a
/// `SplitMix64` of the same seed, on one thread; under concurrency the probe cap is never
/// exceeded and no transition is lost (see the module docs).
///
/// ```
/// use weir_core::{BreakerConfig, Nanos, SharedBreaker};
/// let cfg = BreakerConfig { consecutive_failures: Some(1), ..BreakerConfig::default() };
/// let b = SharedBreaker::new(cfg, 42).unwrap();
/// let a = b.allow(Nanos(0)).unwrap();
/// let t = b.record_failure(a.ticket, Nanos(1), Nanos(1)).unwrap();
/// assert_eq!((t.from.as_str(), t.to.as_str()), ("closed", "open"));
/// assert!(b.allow(Nanos(2)).is_err());
/// ```
#[derive(Debug)]
pub struct SharedBreaker {
    cfg: BreakerConfig,
    state: AtomicU64,
    at: AtomicU64,
    window: AtomicU64,
    rng: AtomicU64,
}

impl SharedBreaker {
    /// A CLOSED breaker whose jitter/ramp generator is seeded with `seed`.
    pub fn new(cfg: BreakerConfig, seed: u64) -> Result<Self, ParamError> {
        cfg.validate()?;
        Ok(SharedBreaker {
            cfg,
            state: AtomicU64::new(0),
            at: AtomicU64::new(0),
            window: AtomicU64::new(0),
            rng: AtomicU64::new(seed),
        })
    }

    /// The parameters.
    pub fn config(&self) -> &BreakerConfig {
        &self.cfg
    }

    /// Failed recoveries counted so far (a snapshot).
    pub fn failed_recoveries(&self) -> u32 {
        w_k(self.state.load(Ordering::Acquire))
    }

    /// Probes currently in flight (a snapshot).
    pub fn probes_in_flight(&self) -> u32 {
        w_probes(self.state.load(Ordering::Acquire))
    }

    /// The state the next `allow` at `now` acts in (a snapshot).
    pub fn state(&self, now: Nanos) -> BreakerState {
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s & TRANSIT != 0 {
                return w_state(s);
            }
            let at = Nanos(self.at.load(Ordering::Acquire));
            if self.state.load(Ordering::Acquire) == s {
                return effective(w_state(s), at, now);
            }
        }
    }

    /// Completes a transition whose CAS (to `next | TRANSIT`) succeeded.
    #[inline]
    fn publish(&self, next: u64, at: Nanos, clear_window: bool) {
        if clear_window {
            self.window.store(0, Ordering::Release);
        }
        self.at.store(at.0, Ordering::Release);
        self.state.store(next, Ordering::Release);
    }

    /// CAS `cur` → OPEN with exponent `k`; on success publishes the cooldown.
    fn try_open(&self, cur: u64, now: Nanos, k: u32) -> bool {
        let next = w_next(cur, BreakerState::Open, k.min(K_MAX));
        if self
            .state
            .compare_exchange(cur, next | TRANSIT, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        let d = self
            .cfg
            .cooldown
            .duration(w_k(next), &mut AtomicDraw(&self.rng));
        self.publish(next, now.saturating_add(d), false);
        true
    }

    /// May a call go ahead now?
    #[inline(always)]
    pub fn allow(&self, now: Nanos) -> Admission {
        let s = self.state.load(Ordering::Acquire);
        if s & (ST_MASK | TRANSIT | RAMPING) == 0 {
            return admit(w_epoch(s), false, None); // closed, no ramp: one load
        }
        self.allow_slow(now)
    }

    #[cold]
    fn allow_slow(&self, now: Nanos) -> Admission {
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s & TRANSIT != 0 {
                return match w_state(s) {
                    BreakerState::Closed if self.cfg.ramp.is_zero() => {
                        admit(w_epoch(s), false, None)
                    }
                    BreakerState::Closed => reject(RejectReason::Ramp, Nanos::ZERO, None),
                    BreakerState::Open => reject(RejectReason::Open, self.cfg.cooldown.base, None),
                    BreakerState::HalfOpen => reject(RejectReason::HalfOpenFull, Nanos::ZERO, None),
                };
            }
            let at = Nanos(self.at.load(Ordering::Acquire));
            if self.state.load(Ordering::Acquire) != s {
                continue;
            }
            match w_state(s) {
                BreakerState::Closed => {
                    if s & RAMPING != 0 {
                        match self.cfg.ramp_admits(now, at, &mut AtomicDraw(&self.rng)) {
                            None => {
                                // best effort: the next caller takes the one-load path
                                let _ = self.state.compare_exchange(
                                    s,
                                    s & !RAMPING,
                                    Ordering::AcqRel,
                                    Ordering::Relaxed,
                                );
                            }
                            Some(true) => {}
                            Some(false) => return reject(RejectReason::Ramp, Nanos::ZERO, None),
                        }
                    }
                    return admit(w_epoch(s), false, None);
                }
                BreakerState::Open => {
                    if now < at {
                        return reject(RejectReason::Open, at - now, None);
                    }
                    let next = w_next(s, BreakerState::HalfOpen, w_k(s)) + PROBE_ONE;
                    if self
                        .state
                        .compare_exchange(s, next | TRANSIT, Ordering::AcqRel, Ordering::Acquire)
                        .is_err()
                    {
                        continue;
                    }
                    self.publish(next, now.saturating_add(self.cfg.probe_timeout), false);
                    return admit(
                        w_epoch(next),
                        true,
                        tr(now, BreakerState::Open, BreakerState::HalfOpen),
                    );
                }
                BreakerState::HalfOpen => {
                    if now >= at {
                        if !self.try_open(s, now, w_k(s).saturating_add(1)) {
                            continue;
                        }
                        let until = Nanos(self.at.load(Ordering::Acquire));
                        return reject(
                            RejectReason::Open,
                            until - now,
                            tr(now, BreakerState::HalfOpen, BreakerState::Open),
                        );
                    }
                    if w_probes(s) >= self.cfg.probes {
                        return reject(RejectReason::HalfOpenFull, at - now, None);
                    }
                    if self
                        .state
                        .compare_exchange_weak(
                            s,
                            s + PROBE_ONE,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                    {
                        return admit(w_epoch(s), true, None);
                    }
                }
            }
        }
    }

    /// Loads the state word if it is `state`, not in transit, and in `epoch`.
    #[inline(always)]
    fn current(&self, state: BreakerState, epoch: u32) -> Option<u64> {
        let s = self.state.load(Ordering::Acquire);
        (s & TRANSIT == 0 && w_state(s) == state && w_epoch(s) == epoch).then_some(s)
    }

    /// Pushes one outcome; returns the window before and after.
    #[inline(always)]
    fn push_window(&self, failed: bool, slow: bool) -> (u64, u64) {
        let mut cur = self.window.load(Ordering::Relaxed);
        loop {
            let next = self.cfg.push(cur, failed, slow);
            match self
                .window
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return (cur, next),
                Err(v) => cur = v,
            }
        }
    }

    /// Trips from CLOSED (epoch `epoch`) unless it already left that epoch.
    #[cold]
    fn trip(&self, now: Nanos, epoch: u32) -> Option<Transition> {
        loop {
            let s = self.current(BreakerState::Closed, epoch)?;
            let closed_at = Nanos(self.at.load(Ordering::Acquire));
            if self.state.load(Ordering::Acquire) != s {
                continue;
            }
            let k = self.cfg.k_after_closed(w_k(s), closed_at, now);
            if self.try_open(s, now, k) {
                return tr(now, BreakerState::Closed, BreakerState::Open);
            }
        }
    }

    /// Records a successful call of `duration`.
    #[inline(always)]
    pub fn record_success(&self, t: Ticket, now: Nanos, duration: Nanos) -> Option<Transition> {
        if t.probe {
            return self.probe_success(t.epoch, now);
        }
        let s = self.current(BreakerState::Closed, t.epoch)?;
        if s & CONSEC_FIELD != 0 {
            self.reset_streak(s, t.epoch)?;
        }
        if self.cfg.uses_window() {
            let slow = self.cfg.is_slow(duration);
            let (prior, next) = self.push_window(false, slow);
            if self.cfg.success_may_trip(prior, slow) && self.cfg.window_trips(next) {
                return self.trip(now, t.epoch);
            }
        }
        None
    }

    /// Clears the failure streak of CLOSED epoch `epoch`; `None` if it left that epoch.
    #[cold]
    fn reset_streak(&self, mut cur: u64, epoch: u32) -> Option<()> {
        loop {
            match self.state.compare_exchange_weak(
                cur,
                cur & !CONSEC_FIELD,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(()),
                Err(_) => cur = self.current(BreakerState::Closed, epoch)?,
            }
        }
    }

    #[cold]
    fn probe_success(&self, epoch: u32, now: Nanos) -> Option<Transition> {
        loop {
            let s = self.current(BreakerState::HalfOpen, epoch)?;
            if w_succ(s) + 1 >= self.cfg.successes {
                let mut next = w_next(s, BreakerState::Closed, w_k(s));
                if !self.cfg.ramp.is_zero() {
                    next |= RAMPING;
                }
                if self
                    .state
                    .compare_exchange(s, next | TRANSIT, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.publish(next, now, true);
                    return tr(now, BreakerState::HalfOpen, BreakerState::Closed);
                }
            } else {
                let next =
                    (s + SUCC_ONE).saturating_sub(if w_probes(s) > 0 { PROBE_ONE } else { 0 });
                if self
                    .state
                    .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return None;
                }
            }
        }
    }

    /// Records a failed call.
    pub fn record_failure(&self, t: Ticket, now: Nanos, duration: Nanos) -> Option<Transition> {
        if t.probe {
            loop {
                let s = self.current(BreakerState::HalfOpen, t.epoch)?;
                if self.try_open(s, now, w_k(s).saturating_add(1)) {
                    return tr(now, BreakerState::HalfOpen, BreakerState::Open);
                }
            }
        }
        self.current(BreakerState::Closed, t.epoch)?;
        let window_trips = self.cfg.uses_window()
            && self
                .cfg
                .window_trips(self.push_window(true, self.cfg.is_slow(duration)).1);
        loop {
            let s = self.current(BreakerState::Closed, t.epoch)?;
            let consec = (w_consec(s) + 1).min(CONSECUTIVE_MAX);
            let trips =
                window_trips || matches!(self.cfg.consecutive_failures, Some(n) if consec >= n);
            if trips {
                return self.trip(now, t.epoch);
            }
            let next = (s & !CONSEC_FIELD) | (u64::from(consec) << CONSEC_SHIFT);
            if self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return None;
            }
        }
    }

    record!(
        /// Records `failed` or not.
        (&)
    );

    /// Gives the ticket back without an outcome; frees a probe slot.
    pub fn cancel(&self, t: Ticket) {
        if !t.probe {
            return;
        }
        while let Some(s) = self.current(BreakerState::HalfOpen, t.epoch) {
            if w_probes(s) == 0 {
                return;
            }
            if self
                .state
                .compare_exchange_weak(s, s - PROBE_ONE, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        }
    }
}

#[cfg(all(test, not(weir_loom)))]
mod tests {
    use super::*;

    fn cooldown(base: u64, max: u64, jitter_ppm: u32) -> Cooldown {
        Cooldown {
            base: Nanos(base),
            max: Nanos(max),
            multiplier_milli: 2000,
            jitter_ppm,
        }
    }

    fn fail(b: &mut Breaker, now: u64) -> Option<Transition> {
        let t = b.allow(Nanos(now)).ok()?.ticket;
        b.record_failure(t, Nanos(now), Nanos(1))
    }

    #[test]
    fn labels() {
        assert_eq!(BreakerState::HalfOpen.as_str(), "half_open");
        assert_eq!(BreakerState::Open.as_gauge(), 1);
    }

    #[test]
    fn cooldown_grows_then_resets_after_healthy_period() {
        let cfg = BreakerConfig {
            consecutive_failures: Some(1),
            cooldown: cooldown(100, 400, 0),
            ..BreakerConfig::default()
        };
        let mut b = Breaker::new(cfg, SplitMix64::new(0)).unwrap();
        assert!(fail(&mut b, 0).is_some());
        let mut now = 0;
        let mut durations = [0u64; 4];
        for d in durations.iter_mut() {
            let r = b.allow(Nanos(now)).unwrap_err();
            *d = r.retry_after.0;
            now += r.retry_after.0;
            let probe = b.allow(Nanos(now)).unwrap().ticket;
            assert!(b.record_failure(probe, Nanos(now), Nanos(1)).is_some());
        }
        assert_eq!(durations, [100, 200, 400, 400]);
        // recover
        now += 400;
        let probe = b.allow(Nanos(now)).unwrap().ticket;
        assert!(b.record_success(probe, Nanos(now), Nanos(1)).is_some());
        assert_eq!(b.failed_recoveries(), 4);
        // trip soon after closing: k kept
        fail(&mut b, now + 1);
        assert_eq!(b.allow(Nanos(now + 1)).unwrap_err().retry_after, Nanos(400));
        now += 401;
        let probe = b.allow(Nanos(now)).unwrap().ticket;
        b.record_success(probe, Nanos(now), Nanos(1));
        // healthy for cooldown.max: k resets
        now += 400;
        fail(&mut b, now);
        assert_eq!(b.allow(Nanos(now)).unwrap_err().retry_after, Nanos(100));
    }

    #[test]
    fn probe_cap_and_timeout() {
        let cfg = BreakerConfig {
            consecutive_failures: Some(1),
            cooldown: cooldown(10, 10, 0),
            probes: 2,
            successes: 3,
            probe_timeout: Nanos(50),
            ..BreakerConfig::default()
        };
        let mut b = Breaker::new(cfg, SplitMix64::new(0)).unwrap();
        fail(&mut b, 0);
        let p1 = b.allow(Nanos(10)).unwrap();
        assert_eq!(p1.transition.unwrap().to, BreakerState::HalfOpen);
        let p2 = b.allow(Nanos(11)).unwrap().ticket;
        assert_eq!(
            b.allow(Nanos(12)).unwrap_err().reason,
            RejectReason::HalfOpenFull
        );
        b.cancel(p2);
        let _leaked = b.allow(Nanos(13)).unwrap().ticket;
        assert!(b.record_success(p1.ticket, Nanos(14), Nanos(1)).is_none());
        let _leaked2 = b.allow(Nanos(15)).unwrap().ticket;
        assert_eq!(b.state(Nanos(59)), BreakerState::HalfOpen);
        assert_eq!(b.state(Nanos(60)), BreakerState::Open);
        let r = b.allow(Nanos(60)).unwrap_err();
        let t = r.transition.unwrap();
        assert_eq!((t.from, t.to), (BreakerState::HalfOpen, BreakerState::Open));
        assert_eq!(b.failed_recoveries(), 1);
    }

    #[test]
    fn failure_rate_and_slow_calls() {
        let cfg = BreakerConfig {
            consecutive_failures: None,
            failure_rate_ppm: Some(500_000),
            slow_call: Some(SlowCall {
                threshold: Nanos(100),
                rate_ppm: 1_000_000,
            }),
            window: 4,
            min_calls: 4,
            ..BreakerConfig::default()
        };
        let mut b = Breaker::new(cfg, SplitMix64::new(0)).unwrap();
        let outcome = |b: &mut Breaker, failed: bool, dur: u64| {
            let t = b.allow(Nanos(0)).unwrap().ticket;
            b.record(t, Nanos(0), Nanos(dur), failed)
        };
        assert!(outcome(&mut b, true, 1).is_none());
        assert!(outcome(&mut b, false, 1).is_none());
        assert!(outcome(&mut b, true, 1).is_none()); // 3 calls < min_calls
        assert!(outcome(&mut b, false, 1).is_some()); // 2/4 = 50 %
        let mut b = Breaker::new(cfg, SplitMix64::new(0)).unwrap();
        for _ in 0..3 {
            assert!(outcome(&mut b, false, 101).is_none());
        }
        assert!(outcome(&mut b, false, 101).is_some()); // 4/4 slow
    }

    #[test]
    fn ramp_admits_gradually() {
        let cfg = BreakerConfig {
            consecutive_failures: Some(1),
            cooldown: cooldown(10, 10, 0),
            ramp: Nanos(1000),
            ..BreakerConfig::default()
        };
        let mut b = Breaker::new(cfg, SplitMix64::new(5)).unwrap();
        fail(&mut b, 0);
        let p = b.allow(Nanos(10)).unwrap().ticket;
        b.record_success(p, Nanos(10), Nanos(1));
        assert_eq!(b.allow(Nanos(10)).unwrap_err().reason, RejectReason::Ramp);
        let admitted = (0..1000).filter(|_| b.allow(Nanos(510)).is_ok()).count();
        assert!((400..600).contains(&admitted), "{admitted}");
        assert!((0..100).all(|_| b.allow(Nanos(1010)).is_ok()));
    }

    #[test]
    fn config_validation() {
        let ok = BreakerConfig::default();
        assert!(ok.validate().is_ok());
        let bad = [
            BreakerConfig {
                consecutive_failures: Some(0),
                ..ok
            },
            BreakerConfig {
                failure_rate_ppm: Some(0),
                ..ok
            },
            BreakerConfig {
                failure_rate_ppm: Some(1),
                window: 30,
                ..ok
            },
            BreakerConfig {
                failure_rate_ppm: Some(1),
                min_calls: 21,
                ..ok
            },
            BreakerConfig { probes: 0, ..ok },
            BreakerConfig {
                successes: 256,
                ..ok
            },
            BreakerConfig {
                probe_timeout: Nanos::ZERO,
                ..ok
            },
            BreakerConfig {
                cooldown: cooldown(2, 1, 0),
                ..ok
            },
            BreakerConfig {
                cooldown: cooldown(1, 2, 1_000_001),
                ..ok
            },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
            assert!(SharedBreaker::new(c, 0).is_err());
        }
    }

    #[test]
    fn cooldown_jitter_bounds() {
        let c = cooldown(1000, u64::MAX, 200_000);
        assert_eq!(c.bounds(0), (Nanos(800), Nanos(1200)));
        assert_eq!(c.bounds(63).1, Nanos::MAX);
        let mut r = SplitMix64::new(1);
        for k in 0..70 {
            let (lo, hi) = c.bounds(k);
            let d = c.duration(k, &mut r);
            assert!(lo <= d && d <= hi);
        }
    }

    #[test]
    fn shared_closed_path_and_stale_tickets() {
        let cfg = BreakerConfig {
            consecutive_failures: Some(2),
            cooldown: cooldown(10, 10, 0),
            ..BreakerConfig::default()
        };
        let b = SharedBreaker::new(cfg, 0).unwrap();
        let old = b.allow(Nanos(0)).unwrap().ticket;
        for _ in 0..2 {
            let t = b.allow(Nanos(0)).unwrap().ticket;
            b.record_failure(t, Nanos(0), Nanos(1));
        }
        assert_eq!(b.state(Nanos(0)), BreakerState::Open);
        assert!(b.record_failure(old, Nanos(1), Nanos(1)).is_none());
        let p = b.allow(Nanos(10)).unwrap();
        assert!(p.ticket.is_probe());
        assert_eq!(b.probes_in_flight(), 1);
        assert!(b.record_success(p.ticket, Nanos(11), Nanos(1)).is_some());
        assert_eq!(b.state(Nanos(11)), BreakerState::Closed);
    }
}

#[cfg(all(test, weir_loom))]
mod loom_tests {
    use super::*;

    #[test]
    fn probe_cap_holds() {
        loom::model(|| {
            let cfg = BreakerConfig {
                consecutive_failures: Some(1),
                cooldown: Cooldown::NONE,
                probes: 1,
                ..BreakerConfig::default()
            };
            let b = loom::sync::Arc::new(SharedBreaker::new(cfg, 0).unwrap());
            let t = b.allow(Nanos(0)).unwrap().ticket;
            b.record_failure(t, Nanos(0), Nanos(0));
            let b2 = b.clone();
            let h = loom::thread::spawn(move || b2.allow(Nanos(1)).map(|a| a.ticket.is_probe()));
            let mine = b.allow(Nanos(1)).map(|a| a.ticket.is_probe());
            let theirs = h.join().unwrap();
            assert!(!(matches!(mine, Ok(true)) && matches!(theirs, Ok(true))));
        });
    }
}
