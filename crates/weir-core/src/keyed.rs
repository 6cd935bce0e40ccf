//! Bounded keyed state: one limiter per key in fixed capacity.
//!
//! # Why
//! Per-consumer limits key state by a descriptor the *client* controls. An unbounded map
//! lets a client exhaust memory by sending new keys; an LRU lets it *evict* its own
//! exhausted bucket by churning keys and come back to a fresh one. Both are failures. Here
//! the table has a fixed number of slots and one rule:
//!
//! * a slot may be reused **only when its state is equivalent to a fresh one** at `now`
//!   (full bucket, empty window — [`Algorithm::is_fresh_state`]): forgetting it grants
//!   nothing, so churn can never hand a key a fresh bucket;
//! * when every slot in reach is active, the new key shares one **overflow** limiter with
//!   the same parameters, and the decision says so ([`KeyedDecision::overflow`]) so
//!   frontends count `weir_keys_overflow_total`. Overflowing keys throttle one another,
//!   which is conservative.
//!
//! # Keys
//! The core has no hasher: callers pass a `u64` digest of the descriptor. Use a *keyed*
//! 64-bit hash (SipHash with a per-process secret) so clients cannot aim collisions; two
//! descriptors with the same digest share state (conservative: they throttle each other).
//! The digest `0` marks an empty slot and is mapped to `1` (one more such collision).
//!
//! # Layout
//! Open addressing: a key's home slot is `⌊key · len / 2^64⌋`, and it may live in any of
//! the next [`PROBE`] slots. Slots never become empty again (they are only reused in
//! place), so a lookup stops at the first empty slot. Lookups cost at most `PROBE` slot
//! reads; when a key's whole probe window is active it overflows even if other slots of
//! the table are free — bounded work per request is worth that (size tables ≥ 2× the
//! expected active keys).
//!
//! * [`KeyedLimiter`] — single owner, generic over any [`Algorithm`], `N` slots inline.
//! * [`KeyedShared`] — concurrent (`&self`, lock-free except a two-store reclaim window,
//!   below), generic over any [`WordStep`] algorithm (token bucket, leaky bucket, fixed
//!   window, sliding-window counter: the same pure step as their shared forms), over
//!   caller-provided storage `S: AsRef<[Slot]>`, so a std frontend allocates `Box<[Slot]>`
//!   of a size chosen at runtime. **16 bytes per key** whatever the algorithm (an
//!   `AtomicU64` digest and an `AtomicU64` state word). [`KeyedTokenBuckets`] is its token
//!   bucket alias.
//! * The sliding log's state is a whole log, not a word: it has no lock-free keyed form
//!   here (a spin lock over caller memory would need `unsafe` in this `forbid(unsafe_code)`
//!   crate); frontends stripe [`KeyedLimiter`]s behind one small lock per stripe.
//!
//! The lookup reads the home slot first and continues out of line only when the key is
//! not there (the usual hit on a table sized ≥ 2× the active keys is one slot read).
//!
//! # Concurrent reclaim protocol
//! Key and state are two words, so reusing a slot for key `B` while a thread of key `A` is
//! mid-update must not let `A`'s consumption vanish. The reclaimer locks the state word
//! (CAS from the fresh value it checked to a `LOCKED` sentinel — so any concurrent update
//! fails), stores the new key, then stores a fresh state *different* from the locked one.
//! An updater reads the state, then re-reads the key (seqlock style), and after a
//! successful CAS checks the key once more: if its slot was reclaimed meanwhile (ABA on the
//! state word), it charges its cost again in its key's current slot. The victim slot is
//! then over-charged: conservative. Threads that find `LOCKED` spin until the reclaimer's
//! two stores land. The state never takes the sentinel value (`u64::MAX`): a computed word
//! equal to it is replaced by [`WordStep::off_sentinel`] (a TAT one unit, 1/k ns, later; a
//! window one index ahead, which reads as a rewind and keeps counting), conservative. The
//! re-charge uses [`WordStep::charge_word`] (no limit check, saturating at a full state).
//!
//! Known residual race: two threads inserting the *same new* key at the same moment, into
//! a probe window with no empty slot, whose clocks disagree on which slot is already fresh,
//! may each reclaim a different slot. Lookups then find the first one; the key's first
//! admissions may be split over both, so it can get at most one extra `burst` once (the
//! orphan slot is reclaimed when it is fresh again). The single-owner table has no race.
//!
//! ```
//! use weir_core::keyed::{KeyedLimiter, KeyedTokenBuckets, Slot};
//! use weir_core::{Nanos, TokenBucketConfig};
//! let cfg = TokenBucketConfig::new(1, Nanos::from_secs(1), 1).unwrap();
//! let mut table = KeyedLimiter::<_, 2>::new(cfg);
//! assert!(!table.acquire(11, Nanos::ZERO, 1).unwrap().overflow);
//! assert!(!table.acquire(12, Nanos::ZERO, 1).unwrap().overflow);
//! // Both slots hold exhausted buckets: a third key overflows, and churn cannot evict them.
//! assert!(table.acquire(13, Nanos::ZERO, 1).unwrap().overflow);
//! assert!(!table.acquire(11, Nanos::ZERO, 1).unwrap().decision.is_allowed());
//!
//! let slots: Vec<Slot> = (0..1024).map(|_| Slot::new()).collect();
//! let shared = KeyedTokenBuckets::new(cfg, slots.into_boxed_slice());
//! assert!(shared.acquire(42, Nanos::ZERO, 1).unwrap().decision.is_allowed());
//! assert!(!shared.acquire(42, Nanos::ZERO, 1).unwrap().decision.is_allowed());
//! ```

use crate::decision::{Decision, InsufficientCapacity};
use crate::limiter::{Algorithm, WordStep};
use crate::sync::{AtomicU64, Ordering};
use crate::time::Nanos;
use crate::token_bucket::TokenBucketConfig;

/// Slots examined per lookup.
pub const PROBE: usize = 16;

/// A decision of a keyed table, and whether the key was served by the overflow limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyedDecision {
    /// The limiter's decision.
    pub decision: Decision,
    /// True when every slot in reach was active and the shared overflow limiter decided.
    pub overflow: bool,
}

const EMPTY: u64 = 0;

const fn normalize(key: u64) -> u64 {
    if key == EMPTY { 1 } else { key }
}

/// The home slot of `key` in a table of `len` slots (Lemire's multiply-shift range map).
const fn home(key: u64, len: usize) -> usize {
    ((key as u128 * len as u128) >> 64) as usize
}

/// Where a key lives in a single-owner table.
enum Found {
    Slot(usize),
    Overflow,
}

/// A single-owner table of `N` per-key states of one [`Algorithm`] plus an overflow state.
#[derive(Debug, Clone)]
pub struct KeyedLimiter<A: Algorithm, const N: usize> {
    algorithm: A,
    keys: [u64; N],
    states: [A::State; N],
    overflow: A::State,
}

impl<A: Algorithm, const N: usize> KeyedLimiter<A, N> {
    /// An empty table running `algorithm` for every key.
    pub fn new(algorithm: A) -> Self {
        let fresh = algorithm.fresh_state();
        KeyedLimiter {
            keys: [EMPTY; N],
            states: core::array::from_fn(|_| fresh.clone()),
            overflow: fresh,
            algorithm,
        }
    }

    /// The shared configuration.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// Slots currently holding a key (fresh or not).
    pub fn occupied(&self) -> usize {
        self.keys.iter().filter(|&&k| k != EMPTY).count()
    }

    fn find(&mut self, key: u64, now: Nanos) -> Found {
        if N == 0 {
            return Found::Overflow;
        }
        let start = home(key, N);
        let mut candidate = None;
        for i in 0..PROBE.min(N) {
            let j = (start + i) % N;
            let k = self.keys[j];
            if k == key {
                return Found::Slot(j);
            }
            if k == EMPTY {
                let j = candidate.unwrap_or(j);
                self.keys[j] = key;
                self.states[j] = self.algorithm.fresh_state();
                return Found::Slot(j);
            }
            if candidate.is_none() && self.algorithm.is_fresh_state(&self.states[j], now) {
                candidate = Some(j);
            }
        }
        match candidate {
            Some(j) => {
                // Reuse a slot whose state is equivalent to fresh: nothing is forgotten.
                self.keys[j] = key;
                self.states[j] = self.algorithm.fresh_state();
                Found::Slot(j)
            }
            None => Found::Overflow,
        }
    }

    /// Decides on `cost` for `key` (a keyed 64-bit digest) at `now`.
    pub fn acquire(
        &mut self,
        key: u64,
        now: Nanos,
        cost: u64,
    ) -> Result<KeyedDecision, InsufficientCapacity> {
        let key = normalize(key);
        match self.find(key, now) {
            Found::Slot(j) => Ok(KeyedDecision {
                decision: self
                    .algorithm
                    .acquire_state(&mut self.states[j], now, cost)?,
                overflow: false,
            }),
            Found::Overflow => Ok(KeyedDecision {
                decision: self
                    .algorithm
                    .acquire_state(&mut self.overflow, now, cost)?,
                overflow: true,
            }),
        }
    }

    /// The decision `acquire` would return for `key`, recording nothing (a key without a
    /// slot is answered as fresh).
    pub fn peek(&self, key: u64, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        let key = normalize(key);
        if N > 0 {
            let start = home(key, N);
            for i in 0..PROBE.min(N) {
                let j = (start + i) % N;
                if self.keys[j] == key {
                    return self.algorithm.peek_state(&self.states[j], now, cost);
                }
                if self.keys[j] == EMPTY {
                    break;
                }
            }
        }
        self.algorithm
            .peek_state(&self.algorithm.fresh_state(), now, cost)
    }
}

/// One slot of a [`KeyedShared`] table: a key digest and a state word, 16 bytes.
#[derive(Debug, Default)]
pub struct Slot {
    key: AtomicU64,
    word: AtomicU64,
}

impl Slot {
    /// An empty slot.
    #[cfg(not(weir_loom))]
    pub const fn new() -> Self {
        Slot {
            key: AtomicU64::new(EMPTY),
            word: AtomicU64::new(0),
        }
    }
    /// An empty slot.
    #[cfg(weir_loom)]
    pub fn new() -> Self {
        Slot {
            key: AtomicU64::new(EMPTY),
            word: AtomicU64::new(0),
        }
    }
}

/// The state-word sentinel of a slot being reclaimed.
const LOCKED: u64 = u64::MAX;

/// Why an update in a slot must restart its lookup.
struct Moved;

/// Why no slot was located.
enum Busy {
    /// Every slot in reach is active: use the overflow limiter.
    Full,
    /// Lost a race with another thread: look again.
    Retry,
}

/// A concurrent table of per-key limiters of one [`WordStep`] algorithm, keyed by `u64`
/// digests, over caller storage; see the [module docs](self).
#[derive(Debug)]
pub struct KeyedShared<A, S: AsRef<[Slot]>> {
    algorithm: A,
    slots: S,
    overflow: AtomicU64,
}

/// A concurrent table of token buckets (the [`KeyedShared`] of [`TokenBucketConfig`]).
pub type KeyedTokenBuckets<S> = KeyedShared<TokenBucketConfig, S>;

impl<A: WordStep, S: AsRef<[Slot]>> KeyedShared<A, S> {
    /// A table over `slots` (all must be empty, e.g. fresh from [`Slot::new`]).
    pub fn new(algorithm: A, slots: S) -> Self {
        KeyedShared {
            algorithm,
            slots,
            overflow: AtomicU64::new(0),
        }
    }

    /// The parameters.
    pub fn config(&self) -> &A {
        &self.algorithm
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.as_ref().len()
    }

    /// Slots currently holding a key.
    pub fn occupied(&self) -> usize {
        self.slots
            .as_ref()
            .iter()
            .filter(|s| s.key.load(Ordering::Relaxed) != EMPTY)
            .count()
    }

    /// Decides on `cost` for `key` (a keyed 64-bit digest) at `now`.
    #[inline]
    pub fn acquire(
        &self,
        key: u64,
        now: Nanos,
        cost: u64,
    ) -> Result<KeyedDecision, InsufficientCapacity> {
        self.algorithm.check_cost(cost)?;
        let key = normalize(key);
        let now_w = self.algorithm.now_word(now);
        // Each restart means another thread reclaimed or claimed a slot meanwhile; bound
        // the retries and fall back to the overflow limiter (conservative).
        for _ in 0..8 {
            let slot = match self.locate(key, now_w) {
                Ok(slot) => slot,
                Err(Busy::Retry) => continue,
                Err(Busy::Full) => break,
            };
            match self.update(slot, key, now_w, cost, false) {
                Ok(decision) => {
                    return Ok(KeyedDecision {
                        decision,
                        overflow: false,
                    });
                }
                Err(Moved) => continue,
            }
        }
        Ok(KeyedDecision {
            decision: self.update_overflow(now_w, cost, false),
            overflow: true,
        })
    }

    /// The decision `acquire` would return for `key`, recording nothing.
    pub fn peek(&self, key: u64, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
        let a = &self.algorithm;
        a.check_cost(cost)?;
        let key = normalize(key);
        let now_w = a.now_word(now);
        let word = {
            let slots = self.slots.as_ref();
            let start = home(key, slots.len().max(1));
            (0..PROBE.min(slots.len()))
                .map(|i| &slots[(start + i) % slots.len()])
                .take_while(|s| s.key.load(Ordering::Acquire) != EMPTY)
                .find(|s| s.key.load(Ordering::Acquire) == key)
                .map(|s| s.word.load(Ordering::Acquire))
        };
        let word = match word {
            Some(LOCKED) | None => a.fresh_word(now_w, LOCKED),
            Some(w) => w,
        };
        Ok(a.step_word(word, now_w, cost).0)
    }

    /// Finds or claims a slot for `key`.
    #[inline]
    fn locate(&self, key: u64, now_w: u64) -> Result<&Slot, Busy> {
        let slots = self.slots.as_ref();
        if slots.is_empty() {
            return Err(Busy::Full);
        }
        let start = home(key, slots.len());
        // The usual case: the key sits in its home slot.
        let first = &slots[start];
        if first.key.load(Ordering::Acquire) == key {
            return Ok(first);
        }
        self.locate_probe(key, now_w, start)
    }

    /// [`KeyedShared::locate`] beyond the home slot: probe, claim or reclaim.
    #[inline(never)]
    fn locate_probe(&self, key: u64, now_w: u64, start: usize) -> Result<&Slot, Busy> {
        let slots = self.slots.as_ref();
        let a = &self.algorithm;
        let mut candidate: Option<(&Slot, u64, u64)> = None;
        for i in 0..PROBE.min(slots.len()) {
            let slot = &slots[(start + i) % slots.len()];
            let k = slot.key.load(Ordering::Acquire);
            if k == key {
                return Ok(slot);
            }
            if k == EMPTY {
                match slot
                    .key
                    .compare_exchange(EMPTY, key, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => {
                        // A never-used slot holds word 0, which reads as fresh only for
                        // some instants (a TAT 0 for `now_u < 2^63`): make it fresh at
                        // now (unless already updated).
                        let _ = slot.word.compare_exchange(
                            0,
                            a.fresh_word(now_w, 0),
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        );
                        return Ok(slot);
                    }
                    Err(k2) if k2 == key => return Ok(slot),
                    Err(_) => continue,
                }
            }
            if candidate.is_none() {
                let s = slot.word.load(Ordering::Acquire);
                if s != LOCKED && a.is_fresh_word(s, now_w) {
                    candidate = Some((slot, k, s));
                }
            }
        }
        let Some((slot, old_key, s)) = candidate else {
            return Err(Busy::Full);
        };
        // Reclaim: lock the (fresh) state, swap the key, unlock with a different fresh value.
        if slot
            .word
            .compare_exchange(s, LOCKED, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return Err(Busy::Retry);
        }
        let ok = slot
            .key
            .compare_exchange(old_key, key, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        slot.word.store(a.fresh_word(now_w, s), Ordering::Release);
        if ok { Ok(slot) } else { Err(Busy::Retry) }
    }

    /// Applies the step in `slot` for `key`; `forced` charges without a limit check.
    #[inline]
    fn update(
        &self,
        slot: &Slot,
        key: u64,
        now_w: u64,
        cost: u64,
        forced: bool,
    ) -> Result<Decision, Moved> {
        let a = &self.algorithm;
        let mut spins = 0u32;
        loop {
            let s = slot.word.load(Ordering::Acquire);
            if s == LOCKED {
                spins += 1;
                if spins > 1 << 16 {
                    return Err(Moved);
                }
                crate::sync::spin_loop();
                continue;
            }
            if slot.key.load(Ordering::Acquire) != key {
                return Err(Moved);
            }
            let (d, new) = if forced {
                (Decision::forced(), Some(a.charge_word(s, now_w, cost)))
            } else {
                a.step_word(s, now_w, cost)
            };
            let Some(new) = new else { return Ok(d) };
            let new = if new == LOCKED {
                a.off_sentinel(new)
            } else {
                new
            };
            if slot
                .word
                .compare_exchange_weak(s, new, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                if slot.key.load(Ordering::Acquire) != key && !forced {
                    // Our CAS landed after the slot changed hands (ABA on the state word):
                    // the cost went to another key; charge it again where `key` lives now.
                    self.charge(key, now_w, cost);
                }
                return Ok(d);
            }
        }
    }

    /// Charges `cost` for `key` without a limit check (after a reclaim race).
    #[cold]
    fn charge(&self, key: u64, now_w: u64, cost: u64) {
        for _ in 0..8 {
            let slot = match self.locate(key, now_w) {
                Ok(slot) => slot,
                Err(Busy::Retry) => continue,
                Err(Busy::Full) => break,
            };
            if self.update(slot, key, now_w, cost, true).is_ok() {
                return;
            }
        }
        self.update_overflow(now_w, cost, true);
    }

    fn update_overflow(&self, now_w: u64, cost: u64, forced: bool) -> Decision {
        let a = &self.algorithm;
        let mut s = self.overflow.load(Ordering::Relaxed);
        loop {
            let (d, new) = if forced {
                (Decision::forced(), Some(a.charge_word(s, now_w, cost)))
            } else {
                a.step_word(s, now_w, cost)
            };
            let Some(new) = new else { return d };
            match self
                .overflow
                .compare_exchange_weak(s, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return d,
                Err(cur) => s = cur,
            }
        }
    }
}

impl Decision {
    /// Placeholder decision of an internal forced charge (never returned to callers).
    const fn forced() -> Decision {
        Decision {
            verdict: crate::decision::Verdict::Admit,
            remaining: 0,
            retry_after: Nanos::ZERO,
            reset_after: Nanos::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate alloc;

    use super::*;
    use crate::{FixedWindowConfig, LeakyBucketConfig, SlidingLogConfig};
    const S: u64 = 1_000_000_000;

    #[test]
    fn churn_never_hands_out_a_fresh_bucket() {
        let cfg = TokenBucketConfig::new(1, Nanos(S), 2).unwrap();
        let mut t = KeyedLimiter::<_, 4>::new(cfg);
        let slots: [Slot; 4] = core::array::from_fn(|_| Slot::new());
        let c = KeyedTokenBuckets::new(cfg, &slots[..]);
        for k in 1..=4u64 {
            assert!(!t.acquire(k, Nanos(0), 2).unwrap().overflow);
            assert!(!c.acquire(k, Nanos(0), 2).unwrap().overflow);
        }
        // Churn through many new keys: all overflow, exhausted keys keep their state.
        for k in 100..200u64 {
            assert!(t.acquire(k, Nanos(0), 0).unwrap().overflow);
            assert!(c.acquire(k, Nanos(0), 0).unwrap().overflow);
        }
        for k in 1..=4u64 {
            assert!(!t.acquire(k, Nanos(0), 1).unwrap().decision.is_allowed());
            assert!(!c.acquire(k, Nanos(0), 1).unwrap().decision.is_allowed());
        }
        // Once a bucket is full again its slot may be reused.
        assert!(!t.acquire(500, Nanos(2 * S), 1).unwrap().overflow);
        assert!(!c.acquire(500, Nanos(2 * S), 1).unwrap().overflow);
        assert_eq!(core::mem::size_of::<Slot>(), 16);
    }

    #[test]
    fn generic_over_algorithms() {
        let mut a = KeyedLimiter::<_, 8>::new(FixedWindowConfig::new(1, Nanos(S)).unwrap());
        assert!(a.acquire(0, Nanos(0), 1).unwrap().decision.is_allowed());
        assert!(!a.peek(0, Nanos(0), 1).unwrap().is_allowed());
        let mut b =
            KeyedLimiter::<_, 8>::new(LeakyBucketConfig::new(1, Nanos(S), 0, 0, false).unwrap());
        assert!(b.acquire(7, Nanos(0), 1).unwrap().decision.is_allowed());
        let mut c = KeyedLimiter::<_, 2>::new(SlidingLogConfig::<4>::new(2, Nanos(S)).unwrap());
        assert!(c.acquire(7, Nanos(0), 2).unwrap().decision.is_allowed());
        assert!(c.acquire(7, Nanos(0), 3).is_err());
        let mut z = KeyedLimiter::<_, 0>::new(FixedWindowConfig::new(1, Nanos(S)).unwrap());
        assert!(z.acquire(7, Nanos(0), 1).unwrap().overflow);
    }

    #[cfg(feature = "std")]
    #[test]
    fn concurrent_threads_never_over_admit() {
        use core::sync::atomic::AtomicU64 as StdAtomic;
        let cfg = TokenBucketConfig::new(1, Nanos(S), 5).unwrap();
        let slots: alloc::vec::Vec<Slot> = (0..8).map(|_| Slot::new()).collect();
        let table = KeyedTokenBuckets::new(cfg, slots.into_boxed_slice());
        let admitted = StdAtomic::new(0);
        std::thread::scope(|sc| {
            for th in 0..4u64 {
                let (table, admitted) = (&table, &admitted);
                sc.spawn(move || {
                    for i in 0..if cfg!(miri) { 100 } else { 2000u64 } {
                        // 3 hot keys plus churn keys; time advances slowly.
                        let key = if i % 2 == 0 {
                            1 + i % 3
                        } else {
                            1000 + th * 10_000 + i
                        };
                        let now = Nanos(i * 1000);
                        let d = table.acquire(key, now, 1).unwrap();
                        if !d.overflow && key <= 3 && d.decision.is_allowed() {
                            admitted.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        // 3 keys × burst 5, time spans 2 ms (no refill at 1/s): at most 15 admitted.
        assert!(admitted.load(core::sync::atomic::Ordering::Relaxed) <= 15);
    }
}
