//! Bounded keyed state, for every algorithm: the single-owner table and (for the
//! algorithms with a one-word state: token bucket, leaky bucket, fixed window,
//! sliding-window counter) the concurrent table driven from one thread, each against a
//! per-key reference — one plain single-owner limiter per key, plus one for the overflow —
//! that never forgets anything. The sliding log runs its single-owner table (what
//! weir-policy stripes behind one lock per stripe).
//!
//! Checked, while the clock is monotone (and, for the concurrent table, within the
//! algorithm's horizon): every decision for a key served by a slot equals that key's own
//! reference limiter — so reusing a slot never handed a key a fresher state than it had
//! (no eviction of an active key); every overflow decision equals the shared overflow
//! reference; `occupied` never exceeds the capacity. Always: no panic, and a cost above
//! the capacity is `InsufficientCapacity`.

use crate::num::{N, Tick};
use arbitrary::Arbitrary;
use weir_core::keyed::{KeyedLimiter, KeyedShared, Slot};
use weir_core::{
    Algorithm, Decision, FixedWindowConfig, LeakyBucketConfig, Limiter, Nanos, SlidingLogConfig,
    SlidingWindowConfig, TokenBucketConfig, WordStep,
};

/// Slots in the tables (small, so that probe windows fill up).
const SLOTS: usize = 8;

/// A configuration and an operation sequence.
#[derive(Debug, Arbitrary)]
pub struct Input {
    kind: Kind,
    rate: N,
    per: N,
    burst: N,
    ops: Vec<Op>,
}

/// Which algorithm the tables run (`rate`, `per`, `burst` are its parameters).
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Kind {
    /// GCRA `(rate, per, burst)`.
    TokenBucket,
    /// nginx `(rate, per, burst)`, delay 1.
    LeakyBucket,
    /// `burst` per `per`.
    FixedWindow,
    /// `burst` per `per`.
    SlidingWindow,
    /// `burst` per `per`, capacity 8 (single-owner table only).
    SlidingLog,
}

/// A key: one of a few digests that spread over the table, or an arbitrary one.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Key {
    /// A small key index, spread by a multiplicative hash.
    Spread(u8),
    /// A small raw digest (all share home slot 0; includes 0 and 1, which alias).
    Raw(u8),
    /// Any digest.
    Any(u64),
}

impl Key {
    fn digest(self) -> u64 {
        match self {
            Key::Spread(i) => u64::from(i % 24).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            Key::Raw(i) => u64::from(i % 24),
            Key::Any(k) => k,
        }
    }
}

/// One operation.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Op {
    /// Acquire a cost for a key.
    Acquire(Key, N),
    /// Peek a cost for a key.
    Peek(Key, N),
    /// Move the clock.
    Clock(Tick),
}

/// Per-key reference limiters.
struct Reference<A: Algorithm> {
    alg: A,
    keys: Vec<(u64, Limiter<A>)>,
    overflow: Limiter<A>,
}

impl<A: Algorithm + Clone> Reference<A> {
    fn new(alg: A) -> Self {
        Reference {
            overflow: Limiter::from_algorithm(alg.clone()),
            alg,
            keys: Vec::new(),
        }
    }
    fn limiter(&mut self, key: u64, overflow: bool) -> &mut Limiter<A> {
        if overflow {
            return &mut self.overflow;
        }
        let key = if key == 0 { 1 } else { key }; // the tables alias digest 0 to 1
        let i = match self.keys.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.keys
                    .push((key, Limiter::from_algorithm(self.alg.clone())));
                self.keys.len() - 1
            }
        };
        &mut self.keys[i].1
    }
}

fn same(what: &str, got: Decision, want: Decision, key: u64, now: u64) {
    assert_eq!(got, want, "{what}: key {key:#x} at {now}");
}

/// Runs one input.
pub fn check(input: Input) {
    let (r, p, b) = (input.rate.0, Nanos(input.per.0), input.burst.0);
    let ops = &input.ops;
    match input.kind {
        Kind::TokenBucket => {
            if let Ok(c) = TokenBucketConfig::new(r, p, b) {
                run(c, None, Some(c.horizon().0), ops);
            }
        }
        Kind::LeakyBucket => {
            if let Ok(c) = LeakyBucketConfig::new(r, p, b, 1, false) {
                run(c, None, Some(c.horizon().0), ops);
            }
        }
        Kind::FixedWindow => {
            if let Ok(c) = FixedWindowConfig::new(b, p) {
                let h = Some(c.horizon().saturating_mul(p.0));
                run(c, h, h, ops);
            }
        }
        Kind::SlidingWindow => {
            if let Ok(c) = SlidingWindowConfig::new(b, p) {
                let h = Some(c.horizon().saturating_mul(p.0));
                run(c, h, h, ops);
            }
        }
        Kind::SlidingLog => {
            if let Ok(c) = SlidingLogConfig::<8>::new(b, p) {
                run_single(c, None, ops);
            }
        }
    }
}

/// A table that `run` drives: the single-owner one or the concurrent one.
trait Table {
    fn acquire(&mut self, key: u64, now: Nanos, cost: u64) -> Option<(Decision, bool)>;
    fn peek(&self, key: u64, now: Nanos, cost: u64) -> Option<Decision>;
    fn occupied(&self) -> usize;
}

/// `Table` for a keyed form, by its inherent methods of the same names.
macro_rules! table {
    ($form:ident, $ty:ty, $bound:path) => {
        impl<A: $bound> Table for $ty {
            fn acquire(&mut self, key: u64, now: Nanos, cost: u64) -> Option<(Decision, bool)> {
                $form::acquire(self, key, now, cost)
                    .ok()
                    .map(|d| (d.decision, d.overflow))
            }
            fn peek(&self, key: u64, now: Nanos, cost: u64) -> Option<Decision> {
                $form::peek(self, key, now, cost).ok()
            }
            fn occupied(&self) -> usize {
                $form::occupied(self)
            }
        }
    };
}
table!(KeyedLimiter, KeyedLimiter<A, SLOTS>, Algorithm);
table!(KeyedShared, KeyedShared<A, Box<[Slot]>>, WordStep);

/// The single-owner table of any algorithm, compared within `horizon` ns (a window's
/// packed word has one; `None`: exact at every instant).
fn run_single<A: Algorithm + Clone>(alg: A, horizon: Option<u64>, ops: &[Op]) {
    check_table(
        alg.clone(),
        KeyedLimiter::<A, SLOTS>::new(alg),
        horizon,
        ops,
    );
}

/// Both tables of a word algorithm: the single-owner one within `single` ns, the
/// concurrent one within `shared` ns (its word's horizon).
fn run<A: WordStep + Clone>(alg: A, single: Option<u64>, shared: Option<u64>, ops: &[Op]) {
    run_single(alg.clone(), single, ops);
    let slots: Vec<Slot> = (0..SLOTS).map(|_| Slot::new()).collect();
    let table = KeyedShared::new(alg.clone(), slots.into_boxed_slice());
    check_table(alg, table, shared, ops);
}

/// `table` against per-key references, while the clock is monotone and below `horizon`.
fn check_table<A: Algorithm + Clone, T: Table>(
    alg: A,
    mut table: T,
    horizon: Option<u64>,
    ops: &[Op],
) {
    let cap = alg.capacity();
    let horizon = horizon.unwrap_or(u64::MAX);
    let mut reference = Reference::new(alg);
    let (mut now, mut latest) = (0u64, 0u64);
    let mut monotone = true;
    for &op in ops.iter().take(256) {
        let t = Nanos(now);
        let exact = monotone && latest <= horizon;
        match op {
            Op::Clock(tick) => {
                now = tick.apply(now);
                monotone &= now >= latest;
                latest = latest.max(now);
            }
            Op::Acquire(key, N(cost)) => {
                let k = key.digest();
                let got = table.acquire(k, t, cost);
                assert_eq!(got.is_none(), cost > cap);
                let Some((d, overflow)) = got else { continue };
                if exact {
                    let want = reference.limiter(k, overflow).acquire(t, cost).unwrap();
                    same("table vs reference", d, want, k, now);
                }
            }
            Op::Peek(key, N(cost)) => {
                let k = key.digest();
                let Some(d) = table.peek(k, t, cost) else {
                    assert!(cost > cap);
                    continue;
                };
                // A key without a slot is answered as fresh; with a monotone clock that is
                // also its reference (its slot was only reused once it was fresh).
                if exact {
                    let want = reference.limiter(k, false).peek(t, cost).unwrap();
                    same("table peek vs reference", d, want, k, now);
                }
            }
        }
        assert!(table.occupied() <= SLOTS);
    }
}
