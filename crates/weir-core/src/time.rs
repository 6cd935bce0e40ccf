//! Time as integer nanoseconds, and the clocks that supply it.
//!
//! [`Nanos`] is both an instant (nanoseconds since a clock's epoch, usually its creation)
//! and a duration. All arithmetic on it saturates: a clock that jumps to `u64::MAX` or back
//! to zero never panics, and primitives treat an instant earlier than one they have seen
//! as "no time has passed" so a backwards clock never grants extra capacity.

use core::fmt;
use core::ops::{Add, Sub};
use portable_atomic::{AtomicU64, Ordering};

/// An instant or a duration in whole nanoseconds. Saturating arithmetic throughout.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Zero: the epoch, or an empty duration.
    pub const ZERO: Nanos = Nanos(0);
    /// The largest representable instant/duration (about 584 years).
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// Nanoseconds.
    pub const fn new(ns: u64) -> Self {
        Nanos(ns)
    }
    /// From microseconds, saturating.
    pub const fn from_micros(us: u64) -> Self {
        Nanos(us.saturating_mul(1_000))
    }
    /// From milliseconds, saturating.
    pub const fn from_millis(ms: u64) -> Self {
        Nanos(ms.saturating_mul(1_000_000))
    }
    /// From whole seconds, saturating.
    pub const fn from_secs(s: u64) -> Self {
        Nanos(s.saturating_mul(1_000_000_000))
    }
    /// The raw nanosecond count.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
    /// Whole milliseconds, rounded down.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    /// Seconds rounded up (`1ns` → `1`, `0` → `0`). This is what `Retry-After` needs.
    pub const fn as_secs_ceil(self) -> u64 {
        self.0.div_ceil(1_000_000_000)
    }
    /// Seconds as a float (for bindings and logs; not used in decisions).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// `self + rhs`, saturating at [`Nanos::MAX`].
    pub const fn saturating_add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(rhs.0))
    }
    /// `self - rhs`, saturating at zero.
    pub const fn saturating_sub(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(rhs.0))
    }
    /// `self * n`, saturating.
    pub const fn saturating_mul(self, n: u64) -> Nanos {
        Nanos(self.0.saturating_mul(n))
    }
    /// The smaller of two.
    pub const fn min(self, other: Nanos) -> Nanos {
        if self.0 < other.0 { self } else { other }
    }
    /// The larger of two.
    pub const fn max(self, other: Nanos) -> Nanos {
        if self.0 > other.0 { self } else { other }
    }
    /// True for zero.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Add for Nanos {
    type Output = Nanos;
    /// Saturating.
    fn add(self, rhs: Nanos) -> Nanos {
        self.saturating_add(rhs)
    }
}

impl Sub for Nanos {
    type Output = Nanos;
    /// Saturating at zero.
    fn sub(self, rhs: Nanos) -> Nanos {
        self.saturating_sub(rhs)
    }
}

impl From<core::time::Duration> for Nanos {
    /// Saturates durations longer than ~584 years.
    fn from(d: core::time::Duration) -> Nanos {
        Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl From<Nanos> for core::time::Duration {
    fn from(n: Nanos) -> core::time::Duration {
        core::time::Duration::from_nanos(n.0)
    }
}

impl fmt::Debug for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A source of [`Nanos`] instants. Implementations should be monotonic, but primitives
/// never rely on it: a clock going backwards is treated as "no time passed".
pub trait Clock {
    /// The current instant.
    fn now(&self) -> Nanos;

    /// Wall time at [`Clock::now`]: time since the Unix epoch. Rate limits never read it
    /// (they count on `now`, which a wall-clock step cannot move); what is dated in the
    /// calendar does — quota periods, token expiry, log timestamps — and reads it from the
    /// same clock, so a simulation that moves `now` moves the calendar with it. The default
    /// reads `now` itself as time since the epoch: a clock that knows no calendar (a
    /// [`ManualClock`]) starts in 1970 unless its owner anchors it (weir-policy's engine
    /// anchors every clock it is given).
    fn unix(&self) -> Nanos {
        self.now()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Nanos {
        (**self).now()
    }
    fn unix(&self) -> Nanos {
        (**self).unix()
    }
}

/// A clock that moves only when told to. Shareable between threads (`&self` methods).
///
/// ```
/// use weir_core::{Clock, ManualClock, Nanos};
/// let clock = ManualClock::new(Nanos::ZERO);
/// clock.advance(Nanos::from_millis(250));
/// assert_eq!(clock.now(), Nanos::from_millis(250));
/// clock.set(Nanos::from_secs(1));
/// assert_eq!(clock.now().as_secs_ceil(), 1);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A clock that reads `start` until moved.
    pub const fn new(start: Nanos) -> Self {
        ManualClock {
            now: AtomicU64::new(start.0),
        }
    }
    /// Moves the clock forward by `d` (saturating at [`Nanos::MAX`]).
    pub fn advance(&self, d: Nanos) {
        let _ = self
            .now
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(d.0))
            });
    }
    /// Sets the clock to `t`, which may be earlier than now (a rewind).
    pub fn set(&self, t: Nanos) {
        self.now.store(t.0, Ordering::Release);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        Nanos(self.now.load(Ordering::Acquire))
    }
}

/// The monotonic clock of the operating system: nanoseconds since this value was created.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy)]
pub struct StdClock {
    epoch: std::time::Instant,
}

#[cfg(feature = "std")]
impl StdClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        StdClock {
            epoch: std::time::Instant::now(),
        }
    }
    /// A clock with the given epoch (share one epoch between clocks to compare instants).
    pub fn with_epoch(epoch: std::time::Instant) -> Self {
        StdClock { epoch }
    }
    /// The instant this clock counts from.
    pub fn epoch(&self) -> std::time::Instant {
        self.epoch
    }
}

#[cfg(feature = "std")]
impl Default for StdClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "std")]
impl Clock for StdClock {
    fn now(&self) -> Nanos {
        Nanos::from(self.epoch.elapsed())
    }
}

/// A real monotonic clock read from the CPU's time-stamp counter through the
/// [`quanta`](https://docs.rs/quanta) crate: nanoseconds since this value was created.
/// Feature `quanta` (implies `std`).
///
/// **Why.** A frontend reads the clock once per decision, and the decision itself costs a
/// few ns: [`StdClock`] (`Instant::now()`, a vDSO `clock_gettime`) costs 20–60 ns depending
/// on the machine and its clocksource, more than the limiter it feeds. quanta reads the
/// invariant TSC (`rdtsc` on x86-64, `cntvct_el0` on AArch64) and scales the delta with one
/// multiply and shift, calibrated once per process against the OS monotonic clock: ~5–10 ns
/// a read. That is the clock governor uses by default, so the `clock` bench suite compares
/// like with like.
///
/// **Fallback.** Where quanta finds no invariant TSC with `rdtscp` (some VMs, other
/// architectures), it reads the OS monotonic clock instead — the same source as
/// [`StdClock`], at its cost. Either way `now` counts from creation.
///
/// **Monotonic.** Readings never go below zero (a counter value at or below the start
/// reads as `0`). Across cores the invariant TSC is synchronised by the hardware/OS on
/// current machines; if it were not, a reading could step back by the skew — which every
/// weir primitive tolerates by design (an earlier instant counts as "no time passed").
///
/// **Cost of creating one.** The first `QuantaClock::new()` (actually the first
/// `quanta::Clock::new()`) in a process calibrates for up to ~200 ms; later ones reuse the
/// calibration. Create one at start-up and share it (it is `Clone`, `Send` and `Sync`).
///
/// ```
/// use weir_core::{Clock, Nanos, QuantaClock};
/// # if cfg!(miri) { return; } // TSC detection is inline assembly, which miri cannot run
/// let clock = QuantaClock::new();
/// let a = clock.now();
/// let b = clock.now();
/// assert!(b >= a);
/// assert!(clock.now() < Nanos::from_secs(60));
/// ```
#[cfg(feature = "quanta")]
#[derive(Debug, Clone)]
pub struct QuantaClock {
    clock: quanta::Clock,
    start: u64,
}

#[cfg(feature = "quanta")]
impl QuantaClock {
    /// A clock whose epoch is now (calibrates quanta on first use in the process).
    pub fn new() -> Self {
        Self::from_quanta(quanta::Clock::new())
    }
    /// A clock over a given quanta clock (e.g. `quanta::Clock::mock()` in tests), counting
    /// from that clock's current reading.
    pub fn from_quanta(clock: quanta::Clock) -> Self {
        let start = clock.raw();
        QuantaClock { clock, start }
    }
}

#[cfg(feature = "quanta")]
impl Default for QuantaClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "quanta")]
impl Clock for QuantaClock {
    #[inline]
    fn now(&self) -> Nanos {
        Nanos(self.clock.delta_as_nanos(self.start, self.clock.raw()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Nanos::MAX + Nanos(1), Nanos::MAX);
        assert_eq!(Nanos(1) - Nanos(2), Nanos::ZERO);
        assert_eq!(Nanos::MAX.saturating_mul(2), Nanos::MAX);
        assert_eq!(Nanos::from_secs(u64::MAX), Nanos::MAX);
    }

    #[test]
    fn secs_ceil() {
        assert_eq!(Nanos(0).as_secs_ceil(), 0);
        assert_eq!(Nanos(1).as_secs_ceil(), 1);
        assert_eq!(Nanos::from_secs(2).as_secs_ceil(), 2);
        assert_eq!((Nanos::from_secs(2) + Nanos(1)).as_secs_ceil(), 3);
        assert_eq!(Nanos::MAX.as_secs_ceil(), u64::MAX.div_ceil(1_000_000_000));
    }

    #[test]
    fn manual_clock_moves_both_ways() {
        let c = ManualClock::new(Nanos(5));
        c.advance(Nanos(u64::MAX));
        assert_eq!(c.now(), Nanos::MAX);
        c.set(Nanos(3));
        assert_eq!(c.now(), Nanos(3));
    }

    #[cfg(feature = "quanta")]
    #[test]
    fn quanta_clock_counts_from_creation() {
        let (mock, handle) = quanta::Clock::mock();
        handle.increment(1_000);
        let c = QuantaClock::from_quanta(mock);
        assert_eq!(c.now(), Nanos::ZERO);
        handle.increment(2_500);
        assert_eq!(c.now(), Nanos(2_500));
        handle.decrement(3_000); // below the start: reads as zero, never wraps
        assert_eq!(c.now(), Nanos::ZERO);
    }

    #[cfg(feature = "quanta")]
    #[test]
    #[cfg_attr(miri, ignore = "quanta detects the TSC with cpuid: inline assembly")]
    fn quanta_clock_tracks_the_os_clock() {
        let s = StdClock::new();
        let q = QuantaClock::new();
        let gap = s.now(); // q's epoch is at most this much after s's
        let mut last = q.now();
        for _ in 0..10_000 {
            let t = q.now();
            assert!(t >= last, "went back: {t:?} < {last:?}");
            last = t;
        }
        std::thread::sleep(core::time::Duration::from_millis(50));
        let s1 = s.now();
        let qt = q.now();
        let s2 = s.now();
        // qt ∈ [s1 − gap, s2], up to quanta's calibration error (1 % + 1 ms is generous);
        // bracketing by two OS reads keeps preemption out of the bound.
        let slack = s2.0 / 100 + 1_000_000;
        assert!(
            qt.0 + gap.0 + slack >= s1.0,
            "quanta {qt:?}, std {s1:?}..{s2:?}"
        );
        assert!(qt.0 <= s2.0 + slack, "quanta {qt:?}, std {s1:?}..{s2:?}");
        assert!(qt >= Nanos::from_millis(49), "{qt:?}");
    }
}
