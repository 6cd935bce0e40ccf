//! A retry budget: retries may be at most `ratio` × requests, plus a small reserve, over a
//! sliding window of `ttl`.
//!
//! **Why.** Per-request retry limits (say 3 attempts) multiply load by up to 3× exactly when
//! the upstream is failing, which turns a brownout into an outage (a retry storm). A budget
//! bounds the *fleet-wide* extra load instead: with `ratio = 0.2` retries add at most 20 %,
//! whatever the per-request limits say. The reserve (`min_per_sec × ttl` retries) lets
//! low-traffic routes still retry. Same model as Finagle's `RetryBudget` and tower's
//! `TpsBudget`.
//!
//! **Exact model.** With `D` deposits (requests) and `W` granted withdrawals (retries) in the
//! last `ttl` (the window `(now − ttl, now]`, `now` the latest instant seen), a withdrawal
//! is granted iff `W + 1 ≤ ratio × D + min_per_sec × ttl`.
//!
//! **No float over-grant.** tower's `TpsBudget` converted the float ratio into integer token
//! counts by truncation in ways that could grant more than the ratio (tower-rs/tower#857).
//! Here the ratio is an integer in parts per million (`ratio_ppm`; `0.2` = `200_000`), so
//! decimal ratios as written in config files are represented exactly, and the test is the
//! integer inequality `1e6 × (W + 1) ≤ ratio_ppm × D + reserve_ppm` with
//! `reserve_ppm = ⌊min_per_sec × ttl_ns / 1000⌋` (rounded down: conservative).
//! [`ratio_ppm_from_f64`] rounds a float to the *nearest* ppm, because a literal such as `0.3`
//! is not exact in binary and rounding down would turn it into 0.299999.
//!
//! **Window approximation (conservative).** Instead of a list of events, time is cut into
//! `16` ring slots of `L = 2^k` ns, the smallest power of two with `⌈ttl/L⌉ ≤ 15` (so
//! `ttl/15 ≤ L < 2·ttl/15`). Deposits are counted over the newest `⌊ttl/L⌋` slots, which
//! lie entirely inside the exact window, so deposits expire *early* (by less than two slot
//! lengths, i.e. < 2·ttl/7.5 in the worst case, ~ttl/15 typically); withdrawals are counted
//! over `⌈ttl/L⌉ + 1` slots, which cover the exact window, so they expire *late*. Both
//! errors reduce what is granted: the budget **never grants more than the exact model**.
//! The property tests check this against an event-list model on every grant.
//!
//! **Limits.** `ttl ≥ 1 s` (as tower), so `L ≥ 2^26 ns` and a slot index fits the 38-bit tag
//! of its slot word exactly (no aliasing for any `u64` instant); each slot counts up to
//! 2^26 − 1 events per kind: further deposits in that slot are dropped (conservative) and a
//! withdrawal that would overflow is refused. `ratio ≤ 1000` (`ratio_ppm ≤ 1e9`).
//!
//! **Clock.** The budget keeps the highest slot index seen; an earlier instant is treated
//! as that slot (no time passed), so a rewind never expires events early.
//!
//! **Concurrency ([`SharedRetryBudget`]).** A deposit is one CAS on its slot. A withdrawal
//! first *reserves* (CAS-increments its slot), then sums the ring and, if over budget, undoes
//! its reservation. Of any set of concurrent grants, the one that started its sum last saw all
//! the others' reservations, so together they never exceed the budget; concurrent
//! withdrawals may see each other's temporary reservations and both refuse (conservative).

use crate::error::ParamError;
use crate::sync::{AtomicU64, Ordering};
use crate::time::Nanos;

const SLOTS: usize = 16;
const COUNT_BITS: u32 = 26;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
const PPM: u128 = 1_000_000;

/// The largest ratio accepted (×1000), in parts per million.
pub const RATIO_PPM_MAX: u32 = 1_000_000_000;

/// Converts a ratio such as `0.2` to parts per million, rounding to the nearest ppm.
/// `None` for NaN, negative values and ratios above 1000.
pub fn ratio_ppm_from_f64(ratio: f64) -> Option<u32> {
    if !(0.0..=1000.0).contains(&ratio) {
        return None;
    }
    // 0.5 + x, truncated, is round-half-up for non-negative x; no `f64::round` in core.
    Some((ratio * 1e6 + 0.5) as u32)
}

/// Validated retry-budget parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryBudgetConfig {
    ratio_ppm: u32,
    min_per_sec: u32,
    ttl: Nanos,
    shift: u32,
    dep_slots: u64,
    wd_slots: u64,
    reserve_ppm: u128,
}

impl RetryBudgetConfig {
    /// `ratio_ppm ≤ 1e9` (see [`ratio_ppm_from_f64`]), `ttl ≥ 1 s`.
    pub fn new(ratio_ppm: u32, min_per_sec: u32, ttl: Nanos) -> Result<Self, ParamError> {
        if ratio_ppm > RATIO_PPM_MAX {
            return Err(ParamError::OutOfRange("ratio"));
        }
        if ttl < Nanos::from_secs(1) {
            return Err(ParamError::OutOfRange("ttl"));
        }
        // Smallest k with ceil(ttl / 2^k) <= SLOTS - 1.
        let mut shift = 0;
        while ttl.0.div_ceil(1u64 << shift) > (SLOTS as u64 - 1) {
            shift += 1;
        }
        let len = 1u64 << shift;
        let reserve_ppm = u128::from(min_per_sec) * u128::from(ttl.0) / 1000;
        Ok(RetryBudgetConfig {
            ratio_ppm,
            min_per_sec,
            ttl,
            shift,
            dep_slots: ttl.0 / len,
            wd_slots: ttl.0.div_ceil(len) + 1,
            reserve_ppm,
        })
    }
    /// Retries per request, in parts per million.
    pub const fn ratio_ppm(&self) -> u32 {
        self.ratio_ppm
    }
    /// Reserve retries per second.
    pub const fn min_per_sec(&self) -> u32 {
        self.min_per_sec
    }
    /// The window.
    pub const fn ttl(&self) -> Nanos {
        self.ttl
    }
    /// The slot length `L` (a power of two).
    pub const fn slot_len(&self) -> Nanos {
        Nanos(1 << self.shift)
    }

    #[inline]
    fn index(&self, now: Nanos) -> u64 {
        now.0 >> self.shift
    }

    /// Whole retries still grantable given the window sums.
    #[inline]
    fn credit(&self, deposits: u64, withdrawals: u64) -> u128 {
        (u128::from(self.ratio_ppm) * u128::from(deposits) + self.reserve_ppm)
            .saturating_sub(PPM * u128::from(withdrawals))
            / PPM
    }

    /// Sums (deposits, withdrawals) visible at slot index `idx`.
    #[inline]
    fn sums(&self, idx: u64, dep: impl Fn(usize) -> u64, wd: impl Fn(usize) -> u64) -> (u64, u64) {
        let dep_lo = idx.saturating_sub(self.dep_slots - 1);
        let wd_lo = idx.saturating_sub(self.wd_slots - 1);
        let (mut d, mut w) = (0u64, 0u64);
        for i in 0..SLOTS {
            let (tag, c) = split(dep(i));
            if tag >= dep_lo && tag <= idx {
                d += c;
            }
            let (tag, c) = split(wd(i));
            if tag >= wd_lo {
                w += c;
            }
        }
        (d, w)
    }
}

#[inline]
const fn split(word: u64) -> (u64, u64) {
    (word >> COUNT_BITS, word & COUNT_MAX)
}

/// The slot word after counting one event at `idx`, or `None` if it cannot be counted
/// (slot full, or already reused by a newer index).
#[inline]
const fn bump(word: u64, idx: u64) -> Option<u64> {
    let (tag, c) = split(word);
    if tag == idx {
        if c >= COUNT_MAX { None } else { Some(word + 1) }
    } else if tag < idx {
        Some((idx << COUNT_BITS) | 1)
    } else {
        None
    }
}

/// The single-owner retry budget (`&mut self`).
///
/// ```
/// use weir_core::{Nanos, RetryBudget, RetryBudgetConfig};
/// // 20 % of requests, no reserve, over 10 s
/// let cfg = RetryBudgetConfig::new(200_000, 0, Nanos::from_secs(10)).unwrap();
/// let mut b = RetryBudget::new(cfg);
/// let now = Nanos::from_secs(1);
/// assert!(!b.try_withdraw(now));
/// for _ in 0..10 { b.deposit(now); }
/// assert!(b.try_withdraw(now));
/// assert!(b.try_withdraw(now));
/// assert!(!b.try_withdraw(now)); // 2 = 20 % of 10
/// ```
#[derive(Debug, Clone)]
pub struct RetryBudget {
    cfg: RetryBudgetConfig,
    head: u64,
    dep: [u64; SLOTS],
    wd: [u64; SLOTS],
    /// The window sums `(deposits, withdrawals)` as seen at slot index `sums_idx`, kept
    /// current by every count at that index, so a withdrawal is O(1) until the head moves
    /// to a new slot (once per slot length, ≥ 67 ms). Exactly what a full sum would give:
    /// at a fixed index, only the slot of that index changes, and it lies in both windows;
    /// a slot reused for that index held an index at least `SLOTS` older, outside both.
    sums_idx: u64,
    sums: (u64, u64),
}

impl RetryBudget {
    /// An empty budget (only the reserve is available).
    pub const fn new(cfg: RetryBudgetConfig) -> Self {
        RetryBudget {
            cfg,
            head: 0,
            dep: [0; SLOTS],
            wd: [0; SLOTS],
            // All slots empty: the sums at index 0 are zero.
            sums_idx: 0,
            sums: (0, 0),
        }
    }
    /// The parameters.
    pub const fn config(&self) -> &RetryBudgetConfig {
        &self.cfg
    }
    #[inline]
    fn idx(&mut self, now: Nanos) -> u64 {
        self.head = self.head.max(self.cfg.index(now));
        self.head
    }
    /// The window sums at `idx` (the head), from the cache or recomputed when the head
    /// has moved since.
    #[inline]
    fn window_sums(&mut self, idx: u64) -> (u64, u64) {
        if self.sums_idx != idx {
            self.sums = self.cfg.sums(idx, |i| self.dep[i], |i| self.wd[i]);
            self.sums_idx = idx;
        }
        self.sums
    }
    /// Records one request.
    #[inline]
    pub fn deposit(&mut self, now: Nanos) {
        let idx = self.idx(now);
        let s = &mut self.dep[(idx % SLOTS as u64) as usize];
        if let Some(w) = bump(*s, idx) {
            *s = w;
            if self.sums_idx == idx {
                self.sums.0 += 1;
            }
        }
    }
    /// Takes one retry if the budget allows it.
    #[inline]
    pub fn try_withdraw(&mut self, now: Nanos) -> bool {
        let idx = self.idx(now);
        let (d, w) = self.window_sums(idx);
        if self.cfg.credit(d, w) == 0 {
            return false;
        }
        let s = &mut self.wd[(idx % SLOTS as u64) as usize];
        match bump(*s, idx) {
            Some(v) => {
                *s = v;
                self.sums.1 += 1; // sums_idx == idx here
                true
            }
            None => false,
        }
    }
    /// Whole retries grantable now.
    pub fn available(&mut self, now: Nanos) -> u64 {
        let idx = self.idx(now);
        let (d, w) = self.window_sums(idx);
        u64::try_from(self.cfg.credit(d, w)).unwrap_or(u64::MAX)
    }
}

/// The lock-free shared retry budget (`&self`); same decisions as [`RetryBudget`] on a
/// single thread.
///
/// ```
/// use weir_core::{Nanos, RetryBudgetConfig, SharedRetryBudget};
/// // no ratio, reserve 1 retry/s over 10 s = 10 retries
/// let b = SharedRetryBudget::new(RetryBudgetConfig::new(0, 1, Nanos::from_secs(10)).unwrap());
/// let granted = (0..20).filter(|_| b.try_withdraw(Nanos::ZERO)).count();
/// assert_eq!(granted, 10);
/// ```
#[derive(Debug)]
pub struct SharedRetryBudget {
    cfg: RetryBudgetConfig,
    head: AtomicU64,
    dep: [AtomicU64; SLOTS],
    wd: [AtomicU64; SLOTS],
}

impl SharedRetryBudget {
    /// An empty budget (only the reserve is available).
    pub fn new(cfg: RetryBudgetConfig) -> Self {
        SharedRetryBudget {
            cfg,
            head: AtomicU64::new(0),
            dep: core::array::from_fn(|_| AtomicU64::new(0)),
            wd: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
    /// The parameters.
    pub const fn config(&self) -> &RetryBudgetConfig {
        &self.cfg
    }
    #[inline]
    fn idx(&self, now: Nanos) -> u64 {
        let i = self.cfg.index(now);
        let h = self.head.load(Ordering::Acquire);
        if i > h {
            self.head.fetch_max(i, Ordering::AcqRel);
            i
        } else {
            h
        }
    }
    /// Records one request.
    #[inline]
    pub fn deposit(&self, now: Nanos) {
        let idx = self.idx(now);
        let s = &self.dep[(idx % SLOTS as u64) as usize];
        let mut cur = s.load(Ordering::Relaxed);
        while let Some(next) = bump(cur, idx) {
            match s.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return,
                Err(v) => cur = v,
            }
        }
    }
    /// Takes one retry if the budget allows it.
    #[inline]
    pub fn try_withdraw(&self, now: Nanos) -> bool {
        let idx = self.idx(now);
        let s = &self.wd[(idx % SLOTS as u64) as usize];
        // 1. reserve
        let mut cur = s.load(Ordering::Relaxed);
        loop {
            let Some(next) = bump(cur, idx) else {
                return false;
            };
            match s.compare_exchange_weak(cur, next, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => break,
                Err(v) => cur = v,
            }
        }
        // 2. validate (our reservation is included in the sum)
        let (d, w) = self.cfg.sums(
            idx,
            |i| self.dep[i].load(Ordering::SeqCst),
            |i| self.wd[i].load(Ordering::SeqCst),
        );
        if PPM * u128::from(w)
            <= u128::from(self.cfg.ratio_ppm) * u128::from(d) + self.cfg.reserve_ppm
        {
            return true;
        }
        // 3. undo, unless the slot was already reused (then our count is gone anyway)
        let mut cur = s.load(Ordering::Relaxed);
        loop {
            let (tag, c) = split(cur);
            if tag != idx || c == 0 {
                return false;
            }
            match s.compare_exchange_weak(cur, cur - 1, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => return false,
                Err(v) => cur = v,
            }
        }
    }
    /// Whole retries grantable now (a snapshot).
    pub fn available(&self, now: Nanos) -> u64 {
        let idx = self.idx(now);
        let (d, w) = self.cfg.sums(
            idx,
            |i| self.dep[i].load(Ordering::Acquire),
            |i| self.wd[i].load(Ordering::Acquire),
        );
        u64::try_from(self.cfg.credit(d, w)).unwrap_or(u64::MAX)
    }
}

#[cfg(all(test, not(weir_loom)))]
mod tests {
    use super::*;

    fn cfg(ratio_ppm: u32, min: u32, ttl_s: u64) -> RetryBudgetConfig {
        RetryBudgetConfig::new(ratio_ppm, min, Nanos::from_secs(ttl_s)).unwrap()
    }

    #[test]
    fn slots_cover_the_window() {
        for ttl in [1u64, 7, 10, 60, 3600] {
            let c = cfg(0, 0, ttl);
            let l = c.slot_len().0;
            assert!(c.dep_slots * l <= c.ttl.0, "{ttl}");
            assert!((c.wd_slots - 1) * l >= c.ttl.0);
            assert!(c.wd_slots as usize <= SLOTS && c.dep_slots >= 7);
            assert!(c.shift >= 26);
        }
        let huge = RetryBudgetConfig::new(0, 0, Nanos::MAX).unwrap();
        assert!(huge.wd_slots as usize <= SLOTS);
    }

    #[test]
    fn ratio_and_reserve() {
        let mut b = RetryBudget::new(cfg(200_000, 1, 10));
        // reserve: 1/s × 10 s = 10
        assert_eq!(b.available(Nanos::ZERO), 10);
        for _ in 0..10 {
            b.deposit(Nanos::ZERO);
        }
        assert_eq!(b.available(Nanos::ZERO), 12);
        let n = (0..20).filter(|_| b.try_withdraw(Nanos::ZERO)).count();
        assert_eq!(n, 12);
        // after more than ttl + 2 slots everything has expired
        let later = Nanos::from_secs(12);
        assert_eq!(b.available(later), 10);
        // a rewind is "no time passed"
        assert_eq!(b.available(Nanos::ZERO), 10);
    }

    #[test]
    fn exact_decimal_ratio() {
        assert_eq!(ratio_ppm_from_f64(0.2), Some(200_000));
        assert_eq!(ratio_ppm_from_f64(0.3), Some(300_000));
        assert_eq!(ratio_ppm_from_f64(1000.0), Some(1_000_000_000));
        assert_eq!(ratio_ppm_from_f64(-0.1), None);
        assert_eq!(ratio_ppm_from_f64(f64::NAN), None);
        let mut b = RetryBudget::new(cfg(200_000, 0, 10));
        for _ in 0..5 {
            b.deposit(Nanos(5));
        }
        assert!(b.try_withdraw(Nanos(5)));
        assert!(!b.try_withdraw(Nanos(5)));
    }

    #[test]
    fn config_limits() {
        assert!(RetryBudgetConfig::new(RATIO_PPM_MAX + 1, 0, Nanos::from_secs(1)).is_err());
        assert!(RetryBudgetConfig::new(0, 0, Nanos::from_millis(999)).is_err());
        let c = RetryBudgetConfig::new(RATIO_PPM_MAX, u32::MAX, Nanos::MAX).unwrap();
        let mut b = RetryBudget::new(c);
        b.deposit(Nanos::MAX);
        assert!(b.try_withdraw(Nanos::MAX));
    }

    #[test]
    fn shared_matches_single() {
        let c = cfg(500_000, 0, 1);
        let mut a = RetryBudget::new(c);
        let s = SharedRetryBudget::new(c);
        let mut t = 0u64;
        for i in 0..if cfg!(miri) { 100 } else { 2000u64 } {
            t = t.wrapping_add(i.wrapping_mul(0x9E37_79B9) % 50_000_000);
            let now = Nanos(t);
            if i % 3 == 0 {
                assert_eq!(a.try_withdraw(now), s.try_withdraw(now), "step {i}");
            } else {
                a.deposit(now);
                s.deposit(now);
            }
        }
    }
}

#[cfg(all(test, weir_loom))]
mod loom_tests {
    use super::*;

    #[test]
    fn concurrent_withdrawals_never_over_grant() {
        loom::model(|| {
            // reserve exactly 1 retry
            let c = RetryBudgetConfig::new(0, 1, Nanos::from_secs(1)).unwrap();
            let b = loom::sync::Arc::new(SharedRetryBudget::new(c));
            let b2 = b.clone();
            let t = loom::thread::spawn(move || b2.try_withdraw(Nanos::ZERO));
            let mine = b.try_withdraw(Nanos::ZERO);
            let theirs = t.join().unwrap();
            assert!(!(mine && theirs));
        });
    }
}
