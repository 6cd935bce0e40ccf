//! Exponential, capped backoff between retries, with injected jitter.
//!
//! **Why.** Retrying at once, or at fixed intervals, synchronises clients: after an outage
//! they all come back in the same instants and knock the recovering service over again.
//! Exponential growth spreads retries out in time; jitter spreads them across clients
//! (see "Exponential Backoff And Jitter", AWS Architecture Blog, 2015, for the four
//! strategies offered here).
//!
//! **Schedule.** Attempt `n` (1 = the first *retry*; 0 = the first try, which waits 0) has
//! the un-jittered delay `d(n) = min(max, base × multiplier^(n-1))`. The multiplier is a
//! fixed-point number in thousandths (`2000` = ×2, `1500` = ×1.5), validated to
//! `1000..=1_000_000`. Then:
//! - [`Jitter::None`] gives `d`;
//! - [`Jitter::Full`] gives uniform in `[0, d]`;
//! - [`Jitter::Equal`] gives `⌊d/2⌋ + uniform[0, ⌈d/2⌉]`, i.e. in `[⌊d/2⌋, d]`;
//! - [`Jitter::Decorrelated`] gives `min(max, uniform[base, max(base, 3 × prev)])` where `prev` is
//!   the previous delay. It needs state: use [`BackoffSequence`] (or
//!   [`Backoff::delay_after`]). The stateless [`Backoff::delay`] uses `prev = d(n-1)` (and
//!   `prev = base` for attempt 1, as in the AWS formulation); decorrelated jitter ignores
//!   the multiplier.
//!
//! **Bounds and rounding.** Every delay is `<= max`, for any attempt up to `u32::MAX`
//! (the power is computed by square-and-multiply with an early exit at the cap, so at most
//! 32 steps). With the multiplier ×1 or ×2 the result is exact integer arithmetic; otherwise
//! `base × multiplier^(n-1)` is evaluated in `f64` (relative error below 1e-13) and rounded
//! down to whole nanoseconds. Uniform draws are inclusive of both ends.

use crate::error::ParamError;
use crate::rng::Rng;
use crate::time::Nanos;

/// How a delay is randomised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Jitter {
    /// No randomness: exactly the exponential schedule.
    None,
    /// Uniform in `[0, d]` (the default: spreads clients best).
    #[default]
    Full,
    /// Uniform in `[d/2, d]`: never shorter than half the schedule.
    Equal,
    /// `min(max, uniform[base, 3 × previous delay])` (stateful, see module docs).
    Decorrelated,
}

impl Jitter {
    /// The config spelling: `none`, `full`, `equal`, `decorrelated`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Jitter::None => "none",
            Jitter::Full => "full",
            Jitter::Equal => "equal",
            Jitter::Decorrelated => "decorrelated",
        }
    }
    /// Parses the config spelling.
    pub fn parse(s: &str) -> Option<Jitter> {
        Some(match s {
            "none" => Jitter::None,
            "full" => Jitter::Full,
            "equal" => Jitter::Equal,
            "decorrelated" => Jitter::Decorrelated,
            _ => return None,
        })
    }
}

/// The multiplier meaning ×1, in thousandths.
pub const MULTIPLIER_ONE: u32 = 1000;
/// The largest accepted multiplier (×1000), in thousandths.
pub const MULTIPLIER_MAX: u32 = 1_000_000;

/// An exponential capped backoff policy. Immutable; `Copy`.
///
/// ```
/// use weir_core::{Backoff, Jitter, Nanos, SplitMix64};
/// let b = Backoff::new(Nanos::from_millis(25), Nanos::from_millis(250), 2000, Jitter::None).unwrap();
/// let mut rng = SplitMix64::new(1);
/// assert_eq!(b.delay(1, &mut rng), Nanos::from_millis(25));
/// assert_eq!(b.delay(3, &mut rng), Nanos::from_millis(100));
/// assert_eq!(b.delay(u32::MAX, &mut rng), Nanos::from_millis(250));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Backoff {
    base: Nanos,
    max: Nanos,
    multiplier_milli: u32,
    jitter: Jitter,
}

impl Backoff {
    /// `base` ≤ `max`; `multiplier_milli` in `1000..=1_000_000` (thousandths).
    pub const fn new(
        base: Nanos,
        max: Nanos,
        multiplier_milli: u32,
        jitter: Jitter,
    ) -> Result<Self, ParamError> {
        if base.0 > max.0 {
            return Err(ParamError::Order {
                low: "base",
                high: "max",
            });
        }
        if multiplier_milli < MULTIPLIER_ONE || multiplier_milli > MULTIPLIER_MAX {
            return Err(ParamError::OutOfRange("multiplier"));
        }
        Ok(Backoff {
            base,
            max,
            multiplier_milli,
            jitter,
        })
    }

    /// Doubling backoff (multiplier ×2).
    pub const fn exponential(base: Nanos, max: Nanos, jitter: Jitter) -> Result<Self, ParamError> {
        Self::new(base, max, 2000, jitter)
    }

    /// The first retry's un-jittered delay.
    pub const fn base(&self) -> Nanos {
        self.base
    }
    /// The cap.
    pub const fn max(&self) -> Nanos {
        self.max
    }
    /// The growth factor in thousandths.
    pub const fn multiplier_milli(&self) -> u32 {
        self.multiplier_milli
    }
    /// The jitter strategy.
    pub const fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The un-jittered delay of attempt `attempt` (1 = first retry; 0 → zero).
    pub fn schedule(&self, attempt: u32) -> Nanos {
        if attempt == 0 {
            return Nanos::ZERO;
        }
        exp_capped(self.base, self.max, self.multiplier_milli, attempt - 1)
    }

    /// The delay before attempt `attempt` (1 = first retry; 0 → zero), jittered with `rng`.
    /// Never above `max`.
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Nanos {
        if attempt == 0 {
            return Nanos::ZERO;
        }
        match self.jitter {
            Jitter::Decorrelated => {
                let prev = exp_capped(
                    self.base,
                    self.max,
                    self.multiplier_milli,
                    attempt.saturating_sub(2),
                );
                self.delay_after(prev, rng)
            }
            j => apply_jitter(j, self.schedule(attempt), rng),
        }
    }

    /// Decorrelated jitter's step: `min(max, uniform[base, max(base, 3 × prev)])`.
    pub fn delay_after(&self, prev: Nanos, rng: &mut impl Rng) -> Nanos {
        let hi = self.base.max(prev.saturating_mul(3)).min(self.max);
        let lo = self.base.min(hi);
        Nanos(lo.0 + rng.below_inclusive(hi.0 - lo.0))
    }

    /// A stateful sequence of delays starting at attempt 1.
    pub const fn sequence(&self) -> BackoffSequence {
        BackoffSequence {
            backoff: *self,
            attempt: 0,
            prev: self.base,
        }
    }
}

/// The delays of successive retries of one request; keeps the previous delay that
/// decorrelated jitter needs.
///
/// ```
/// use weir_core::{Backoff, Jitter, Nanos, SplitMix64};
/// let b = Backoff::exponential(Nanos(10), Nanos(1000), Jitter::Decorrelated).unwrap();
/// let mut seq = b.sequence();
/// let mut rng = SplitMix64::new(3);
/// for _ in 0..20 {
///     let d = seq.next_delay(&mut rng);
///     assert!(Nanos(10) <= d && d <= Nanos(1000));
/// }
/// assert_eq!(seq.attempt(), 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BackoffSequence {
    backoff: Backoff,
    attempt: u32,
    prev: Nanos,
}

impl BackoffSequence {
    /// The delay before the next retry (attempt 1 first).
    pub fn next_delay(&mut self, rng: &mut impl Rng) -> Nanos {
        self.attempt = self.attempt.saturating_add(1);
        let d = match self.backoff.jitter {
            Jitter::Decorrelated => self.backoff.delay_after(self.prev, rng),
            _ => self.backoff.delay(self.attempt, rng),
        };
        self.prev = d;
        d
    }
    /// Retries delayed so far.
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }
    /// Starts over (e.g. after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
        self.prev = self.backoff.base;
    }
}

fn apply_jitter(j: Jitter, d: Nanos, rng: &mut impl Rng) -> Nanos {
    match j {
        Jitter::None | Jitter::Decorrelated => d,
        Jitter::Full => Nanos(rng.below_inclusive(d.0)),
        Jitter::Equal => {
            let half = d.0 / 2;
            Nanos(half + rng.below_inclusive(d.0 - half))
        }
    }
}

/// `min(max, ⌊base × (milli/1000)^exp⌋)`; exact for ×1 and ×2, `f64` otherwise. At most
/// 32 loop steps.
pub(crate) fn exp_capped(base: Nanos, max: Nanos, milli: u32, exp: u32) -> Nanos {
    if exp == 0 || milli <= MULTIPLIER_ONE || base.0 == 0 {
        return base.min(max);
    }
    if milli == 2000 {
        let d = if exp > base.0.leading_zeros() {
            u64::MAX
        } else {
            base.0 << exp
        };
        return Nanos(d).min(max);
    }
    let limit = max.0 as f64 / base.0 as f64;
    let mut p = 1.0f64;
    let mut b = f64::from(milli) / 1000.0;
    let mut e = exp;
    loop {
        if e & 1 == 1 {
            p *= b;
            if p >= limit {
                return max;
            }
        }
        e >>= 1;
        if e == 0 {
            break;
        }
        b *= b;
    }
    let d = base.0 as f64 * p;
    if d >= max.0 as f64 {
        max
    } else {
        // `as` saturates and d < 2^64 here; `min` guards f64 rounding of `max`.
        Nanos(d as u64).min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn schedule_doubles_and_caps() {
        let b = Backoff::exponential(Nanos(3), Nanos(100), Jitter::None).unwrap();
        let v: [u64; 7] = core::array::from_fn(|i| b.schedule(i as u32).0);
        assert_eq!(v, [0, 3, 6, 12, 24, 48, 96]);
        assert_eq!(b.schedule(8), Nanos(100));
        assert_eq!(b.schedule(u32::MAX), Nanos(100));
        let big = Backoff::exponential(Nanos(1), Nanos::MAX, Jitter::None).unwrap();
        assert_eq!(big.schedule(64), Nanos(1 << 63));
        assert_eq!(big.schedule(65), Nanos::MAX);
    }

    #[test]
    fn fractional_multiplier() {
        let b = Backoff::new(Nanos(1000), Nanos::MAX, 1500, Jitter::None).unwrap();
        assert_eq!(b.schedule(3), Nanos(2250));
        assert_eq!(b.schedule(u32::MAX), Nanos::MAX);
        let one = Backoff::new(Nanos(7), Nanos(9), 1000, Jitter::None).unwrap();
        assert_eq!(one.schedule(u32::MAX), Nanos(7));
        let slow = Backoff::new(Nanos(1), Nanos::MAX, 1001, Jitter::None).unwrap();
        assert!(slow.schedule(u32::MAX) == Nanos::MAX);
    }

    #[test]
    fn jitter_ranges() {
        let mut rng = SplitMix64::new(9);
        for j in [Jitter::Full, Jitter::Equal, Jitter::Decorrelated] {
            let b = Backoff::exponential(Nanos(10), Nanos(1000), j).unwrap();
            for a in 1..40 {
                let d = b.delay(a, &mut rng);
                let s = b.schedule(a);
                assert!(d <= Nanos(1000));
                match j {
                    Jitter::Full => assert!(d <= s),
                    Jitter::Equal => assert!(Nanos(s.0 / 2) <= d && d <= s),
                    _ => assert!(d >= Nanos(10)),
                }
            }
        }
    }

    #[test]
    fn config_errors() {
        assert!(Backoff::new(Nanos(2), Nanos(1), 2000, Jitter::None).is_err());
        assert!(Backoff::new(Nanos(1), Nanos(2), 999, Jitter::None).is_err());
        assert!(Backoff::new(Nanos(1), Nanos(2), 1_000_001, Jitter::None).is_err());
        assert_eq!(Jitter::parse("equal"), Some(Jitter::Equal));
        assert_eq!(
            Jitter::parse(Jitter::Decorrelated.as_str()),
            Some(Jitter::Decorrelated)
        );
        assert_eq!(Jitter::parse("x"), None);
    }
}
