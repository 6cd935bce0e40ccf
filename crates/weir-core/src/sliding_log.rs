//! Exact sliding log with a compile-time capacity.
//!
//! # Why
//! The only window limiter with no error: it remembers the instant of every admitted unit
//! in the last `window` and admits `cost` iff fewer than `limit − cost + 1` of them are
//! younger than `window`. Exactly `limit` in *every* interval of length `window` — at the
//! price of `8·N` bytes per limiter. `N` is a const generic, so memory is fixed and known
//! at compile time; `limit ≤ N` is validated at construction.
//!
//! An event at instant `t` counts while `now < t + window` (the log covers
//! `(now − window, now]`); `t + window` saturates at `Nanos::MAX` (such an event never
//! expires: conservative).
//!
//! # Single-owner only
//! A lock-free log would need a multi-word atomic update (push several entries and move the
//! head together); a spin lock would be simple but is not lock-free. So the log has only the
//! `&mut self` form; share it behind the frontend's own mutex, or use the sliding-window
//! counter, whose shared form is lock-free.
//!
//! # Clock going backwards
//! The log keeps the latest instant seen; an earlier instant is treated as that instant
//! ("no time passed"), so a rewind never frees entries. Times in decisions are measured
//! from the given `now`.
//!
//! # Batches: [`SlidingLog::acquire_batch`]
//! A replay runs millions of events through one log and records only the verdict,
//! `remaining` and `retry_after`. `acquire_batch` runs the same step without building a
//! [`Decision`] (no `reset_after`), scans the expired front once instead of twice, and
//! takes the usual cost-1 event without a branch on the verdict (which flips at random
//! on a trace over the limit): the first expired entry is dropped by a select, the new
//! entry is stored by a select. Same outcomes and same state as `acquire` per event.
//!
//! ```
//! use weir_core::{Nanos, SlidingLog, Verdict};
//! let mut log = SlidingLog::<4>::new(2, Nanos::from_secs(1)).unwrap();
//! assert!(log.acquire(Nanos::from_millis(0), 1).unwrap().is_allowed());
//! assert!(log.acquire(Nanos::from_millis(600), 1).unwrap().is_allowed());
//! let d = log.acquire(Nanos::from_millis(900), 1).unwrap();
//! assert_eq!(d.verdict, Verdict::Reject);
//! assert_eq!(d.retry_after, Nanos::from_millis(100)); // the event at 0 leaves at 1 s
//! ```

use crate::batch::{BatchDecision, Events, Outcomes};
use crate::decision::{Decision, InsufficientCapacity, Verdict};
use crate::error::ParamError;
use crate::limiter::{Algorithm, Limiter};
use crate::time::Nanos;

/// Validated sliding-log parameters for a log of capacity `N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingLogConfig<const N: usize> {
    limit: u64,
    window: Nanos,
}

/// The log: a ring of admitted instants (oldest first) and the latest instant seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlidingLogState<const N: usize> {
    ring: [u64; N],
    head: usize,
    len: usize,
    latest: u64,
}

impl<const N: usize> SlidingLogState<N> {
    const EMPTY: Self = SlidingLogState {
        ring: [0; N],
        head: 0,
        len: 0,
        latest: 0,
    };

    /// The `i`-th oldest entry (`i < len`).
    fn get(&self, i: usize) -> u64 {
        let j = self.head + i;
        // len ≤ N, head < N: j < 2N.
        let j = if j >= N { j - N } else { j };
        self.ring.get(j).copied().unwrap_or(u64::MAX)
    }

    /// Number of entries at the front already expired at `now`.
    fn expired(&self, window: u64, now: u64) -> usize {
        let mut i = 0;
        while i < self.len && self.get(i).saturating_add(window) <= now {
            i += 1;
        }
        i
    }

    /// Entries currently stored (some may be expired).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<const N: usize> SlidingLogConfig<N> {
    /// `limit` admissions in any interval of length `window`; `0 < limit ≤ N`.
    pub const fn new(limit: u64, window: Nanos) -> Result<Self, ParamError> {
        if limit == 0 {
            return Err(ParamError::Zero("limit"));
        }
        if window.0 == 0 {
            return Err(ParamError::Zero("window"));
        }
        if limit > N as u64 {
            return Err(ParamError::LimitAboveCapacity {
                limit,
                capacity: N as u64,
            });
        }
        Ok(SlidingLogConfig { limit, window })
    }
    /// The limit per window.
    pub const fn limit(&self) -> u64 {
        self.limit
    }
    /// The window length.
    pub const fn window(&self) -> Nanos {
        self.window
    }

    /// `cost` fits the log at all (at most `limit`); else the error `acquire` and `peek`
    /// return before looking at the clock.
    #[inline]
    fn fits(&self, cost: u64) -> Result<(), InsufficientCapacity> {
        if cost > self.limit {
            return Err(InsufficientCapacity {
                cost,
                capacity: self.limit,
            });
        }
        Ok(())
    }

    /// Decision at `now` with `skip` expired entries at the front.
    fn decide(&self, s: &SlidingLogState<N>, now: Nanos, eff: u64, cost: u64) -> Decision {
        let w = self.window.0;
        let skip = s.expired(w, eff);
        let live = (s.len - skip) as u64;
        let expiry = |i: usize| Nanos(s.get(skip + i).saturating_add(w)) - now;
        if live + cost <= self.limit {
            let remaining = self.limit - live - cost;
            let reset_after = if live > 0 {
                expiry(0)
            } else if cost > 0 {
                Nanos(eff.saturating_add(w)) - now
            } else {
                Nanos::ZERO
            };
            Decision {
                verdict: Verdict::Admit,
                remaining,
                retry_after: Nanos::ZERO,
                reset_after,
            }
        } else {
            // `live + cost − limit` entries must leave; the last of them is this one.
            let i = (live + cost - self.limit - 1) as usize;
            Decision {
                verdict: Verdict::Reject,
                remaining: self.limit.saturating_sub(live),
                retry_after: expiry(i),
                reset_after: expiry(0),
            }
        }
    }
}

impl<const N: usize> Algorithm for SlidingLogConfig<N> {
    type State = SlidingLogState<N>;

    fn fresh_state(&self) -> SlidingLogState<N> {
        SlidingLogState::EMPTY
    }

    fn acquire_state(
        &self,
        s: &mut SlidingLogState<N>,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity> {
        self.fits(cost)?;
        let eff = now.0.max(s.latest);
        s.latest = eff;
        // Drop expired entries for good.
        let skip = s.expired(self.window.0, eff);
        s.head = (s.head + skip) % N.max(1);
        s.len -= skip;
        let d = self.decide(s, now, eff, cost);
        if d.is_allowed() {
            for _ in 0..cost {
                // len + cost ≤ limit ≤ N.
                let j = (s.head + s.len) % N.max(1);
                if let Some(slot) = s.ring.get_mut(j) {
                    *slot = eff;
                    s.len += 1;
                }
            }
        }
        Ok(d)
    }

    fn peek_state(
        &self,
        s: &SlidingLogState<N>,
        now: Nanos,
        cost: u64,
    ) -> Result<Decision, InsufficientCapacity> {
        self.fits(cost)?;
        Ok(self.decide(s, now, now.0.max(s.latest), cost))
    }

    fn is_fresh_state(&self, s: &SlidingLogState<N>, now: Nanos) -> bool {
        let eff = now.0.max(s.latest);
        s.expired(self.window.0, eff) == s.len
    }

    fn capacity(&self) -> u64 {
        self.limit
    }
}

/// A single-owner exact sliding log of capacity `N`; see the [module docs](self).
pub type SlidingLog<const N: usize> = Limiter<SlidingLogConfig<N>>;

impl<const N: usize> Limiter<SlidingLogConfig<N>> {
    /// An empty log: `limit ≤ N` admissions per sliding `window`.
    pub const fn new(limit: u64, window: Nanos) -> Result<Self, ParamError> {
        match SlidingLogConfig::new(limit, window) {
            Ok(algorithm) => Ok(Limiter {
                algorithm,
                state: SlidingLogState::EMPTY,
            }),
            Err(e) => Err(e),
        }
    }

    /// Decides events `0..len` in order, exactly as `acquire(event(i))` would one by one
    /// (same outcomes, same state after), and hands each outcome to `write(i, ..)`: the
    /// verdict, `remaining` and `retry_after` of `acquire`'s [`Decision`] (not
    /// `reset_after`; `delay` is always zero), or its [`InsufficientCapacity`]. See the
    /// [module docs](self) ("Batches").
    #[inline]
    pub fn acquire_batch<E: Events, W: Outcomes>(
        &mut self,
        len: usize,
        mut event: E,
        mut write: W,
    ) {
        let (limit, w) = (self.algorithm.limit, self.algorithm.window.0);
        let s = &mut self.state;
        // The cursor in locals (registers) for the whole run; the ring stays in place.
        let mut c = Cursor {
            head: s.head,
            len: s.len,
            latest: s.latest,
        };
        for i in 0..len {
            let (now, cost) = event(i);
            if cost > limit {
                write(
                    i,
                    Err(InsufficientCapacity {
                        cost,
                        capacity: limit,
                    }),
                );
                continue;
            }
            let d = c.step(&mut s.ring, limit, w, now.0, cost);
            write(i, Ok(d));
        }
        (s.head, s.len, s.latest) = (c.head, c.len, c.latest);
    }
}

/// `head`, `len` and `latest` of a [`SlidingLogState`], held in locals by a batch.
struct Cursor {
    head: usize,
    len: usize,
    latest: u64,
}

/// A ring position `j < 2N` (or `< 2` for `N ≤ 1`) taken modulo `N`: a mask when `N` is a
/// power of two (as every log size of the Python binding is), so the index is provably in
/// range (no bounds check) and no compare-and-select is needed; a subtraction otherwise.
#[inline(always)]
const fn wrap<const N: usize>(j: usize) -> usize {
    if N.is_power_of_two() {
        j & (N - 1)
    } else if j >= N {
        j - N
    } else {
        j
    }
}

impl Cursor {
    /// The `i`-th oldest entry ([`SlidingLogState::get`]; `i < N`, or `u64::MAX`).
    #[inline(always)]
    fn get<const N: usize>(&self, ring: &[u64; N], i: usize) -> u64 {
        ring.get(wrap::<N>(self.head + i))
            .copied()
            .unwrap_or(u64::MAX)
    }

    /// One acquisition of `cost ≤ limit ≤ N` at `now` for [`SlidingLog::acquire_batch`]:
    /// `acquire_state`'s state change and figures.
    #[inline(always)]
    fn step<const N: usize>(
        &mut self,
        ring: &mut [u64; N],
        limit: u64,
        w: u64,
        now: u64,
        cost: u64,
    ) -> BatchDecision {
        let n = N.max(1);
        let eff = if now > self.latest { now } else { self.latest };
        self.latest = eff;
        // Drop the expired front: the first two entries by selects (in a steady state one
        // entry expires per admission, at random), any further ones in a loop (rarely
        // entered). The three front entries are read from the same `head`, so their loads
        // run in parallel; `&`, not `&&`: no branch (an index beyond the log reads a stale
        // slot or `u64::MAX`, masked by the length).
        let (h, l) = (self.head, self.len);
        let expired = |k: usize| self.get(ring, k).saturating_add(w) <= eff;
        let e0 = (l > 0) & expired(0);
        let e1 = e0 & (l > 1) & expired(1);
        let e2 = e1 & (l > 2) & expired(2);
        let gone = e0 as usize + e1 as usize;
        self.head = wrap::<N>(h + gone);
        self.len = l - gone;
        if e2 {
            self.drop_expired(ring, w, eff);
        }
        let live = self.len as u64;
        let fits = live + cost <= limit;
        if cost == 1 {
            // Store the entry by a select: slot `len` is free whenever it fits (len <
            // limit ≤ N); when it does not, the slot gets back its own value.
            if let Some(slot) = ring.get_mut(wrap::<N>(self.head + self.len)) {
                *slot = core::hint::select_unpredictable(fits, eff, *slot);
            }
            self.len += fits as usize;
        } else if fits {
            for _ in 0..cost {
                let j = (self.head + self.len) % n;
                if let Some(slot) = ring.get_mut(j) {
                    *slot = eff;
                    self.len += 1;
                }
            }
        }
        // Rejected: `live + cost − limit` entries must leave; the last of them is entry
        // `live + cost − limit − 1` (0 when admitted: read, then discarded).
        let i = (live + cost).saturating_sub(limit + 1) as usize;
        let expiry = Nanos(self.get(ring, i).saturating_add(w)) - Nanos(now);
        // Selects, not branches: the verdict flips at random on a trace over the limit.
        BatchDecision {
            allowed: fits,
            remaining: limit.saturating_sub(live + u64::from(fits) * cost),
            retry_after: Nanos(core::hint::select_unpredictable(fits, 0, expiry.0)),
            delay: Nanos::ZERO,
        }
    }

    /// Drops every expired entry at the front (the rare third and later; `len > 0`).
    #[cold]
    #[inline(never)]
    fn drop_expired<const N: usize>(&mut self, ring: &[u64; N], w: u64, eff: u64) {
        let mut i = 0;
        while i < self.len && self.get(ring, i).saturating_add(w) <= eff {
            i += 1;
        }
        self.head = (self.head + i) % N.max(1);
        self.len -= i;
    }
}

#[cfg(test)]
mod tests {
    extern crate alloc;

    use super::*;

    #[test]
    fn exact_window() {
        let mut log = SlidingLog::<8>::new(3, Nanos(100)).unwrap();
        assert!(log.acquire(Nanos(0), 2).unwrap().is_allowed());
        assert!(log.acquire(Nanos(50), 1).unwrap().is_allowed());
        let d = log.acquire(Nanos(60), 2).unwrap();
        assert_eq!(d.verdict, Verdict::Reject);
        assert_eq!(d.retry_after, Nanos(40)); // both entries at 0 leave at 100
        assert_eq!(d.reset_after, Nanos(40));
        assert!(log.acquire(Nanos(100), 2).unwrap().is_allowed());
        // Rewind: no entries freed.
        assert!(!log.acquire(Nanos(0), 1).unwrap().is_allowed());
        assert!(log.is_fresh(Nanos(250)));
        assert!(!log.is_fresh(Nanos(199)));
        assert!(log.acquire(Nanos(0), 4).is_err());
        assert_eq!(
            SlidingLogConfig::<2>::new(3, Nanos(1)),
            Err(ParamError::LimitAboveCapacity {
                limit: 3,
                capacity: 2
            })
        );
        let mut log = SlidingLog::<2>::new(2, Nanos::MAX).unwrap();
        for now in [u64::MAX, 0, 5] {
            let _ = log.acquire(Nanos(now), 2);
        }
    }

    /// `acquire_batch` == per-event `acquire` on a twin: outcomes and the whole state
    /// (ring contents included), with rewinds, u64 instants, several expiries at once,
    /// costs 0 ..= limit + 1 and a full ring (`limit = N`).
    fn batch_equals_each<const N: usize>(limit: u64, window: u64, seed: u64) {
        let mut batch = SlidingLog::<N>::new(limit, Nanos(window)).unwrap();
        let mut each = batch.clone();
        let mut x = seed | 1;
        let mut t = 0u64;
        let n = if cfg!(miri) { 60 } else { 700 };
        let events: alloc::vec::Vec<(u64, u64)> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                t = match x % 16 {
                    0 => t.saturating_sub(x >> 40),
                    1 => [0, u64::MAX, u64::MAX / 2, x][(x >> 8) as usize % 4],
                    2 => t.saturating_add(window.saturating_mul((x >> 30) % 3)),
                    _ => t.saturating_add((x >> 20) % (window / limit + 2)),
                };
                let cost = match (x >> 4) % 8 {
                    0 => 0,
                    1 => limit,
                    2 => limit + 1,
                    3 => (x >> 33) % (limit + 2),
                    _ => 1,
                };
                (t, cost)
            })
            .collect();
        crate::test_support::assert_batch_matches(
            &events,
            |n, event, write| batch.acquire_batch(n, event, write),
            |t, c| each.acquire(t, c),
        );
        let (a, b) = (batch.state(), each.state());
        assert_eq!((a.head, a.len, a.latest), (b.head, b.len, b.latest));
        for i in 0..a.len {
            assert_eq!(a.get(i), b.get(i), "entry {i}");
        }
    }

    #[test]
    fn batch_equals_acquire_per_event() {
        for seed in 1..if cfg!(miri) { 3 } else { 10 } {
            batch_equals_each::<1>(1, 10, seed);
            batch_equals_each::<4>(3, 100, seed);
            batch_equals_each::<4>(4, 100, seed);
            batch_equals_each::<8>(5, 1_000, seed);
            batch_equals_each::<64>(64, 1 << 20, seed);
            batch_equals_each::<2>(2, u64::MAX, seed);
            // Sizes that are not powers of two wrap by a subtraction, not a mask.
            batch_equals_each::<3>(3, 100, seed);
            batch_equals_each::<5>(4, 1_000, seed);
            batch_equals_each::<7>(7, 1 << 20, seed);
        }
    }
}
