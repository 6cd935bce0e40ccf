//! Batches of acquisitions on one lock-free limiter: one load and one CAS per [`BATCH`]
//! events.
//!
//! # Why
//! A trace replay decides millions of events on one limiter and records only the verdict,
//! `remaining`, `retry_after` and the leaky bucket's `delay` of each. Per-event `acquire`
//! pays a `lock cmpxchg` per state change and builds a whole [`Decision`] (with
//! `reset_after`, often the costliest figure) per event. Every shared limiter here is one
//! `AtomicU64` whose step is a pure function of the word, so a batch can load the word
//! once, run the events on a local copy with the very same step, and publish the result
//! with one CAS.
//!
//! # Contract ([`BatchAcquire::acquire_batch`])
//! The outcome of each event is that of `acquire` (verdict, `remaining`, `retry_after`,
//! `delay`, or the [`InsufficientCapacity`] error), bit for bit, and the final word is the
//! one per-event `acquire` would leave. A batch in which no step changed the word is
//! linearised at its load. One that changed it commits with a CAS from the loaded word —
//! also when the word came back to the loaded value (a rewind can do that), so a concurrent
//! write in between is never overwritten. If the CAS fails, the batch is decided again per
//! event with `acquire` (lock-free, so no livelock). Either way the outcome is that of a
//! sequential order of `acquire` calls in which the batch's events keep their order
//! (model-checked with loom for each limiter).

use crate::decision::{Decision, InsufficientCapacity};
use crate::sync::{AtomicU64, Ordering};
use crate::time::Nanos;

/// Events per CAS in `acquire_batch`: long enough that the commit is noise, short enough
/// that a batch lost to a concurrent writer is cheap to redo.
pub const BATCH: usize = 256;

/// One event's outcome in `acquire_batch`: the fields of `acquire`'s [`Decision`] that a
/// replay records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchDecision {
    /// [`Decision::is_allowed`].
    pub allowed: bool,
    /// [`Decision::remaining`].
    pub remaining: u64,
    /// [`Decision::retry_after`] (zero when allowed).
    pub retry_after: Nanos,
    /// [`Decision::delay`] (zero unless a leaky bucket delays an admitted event).
    pub delay: Nanos,
}

impl From<Decision> for BatchDecision {
    fn from(d: Decision) -> Self {
        BatchDecision {
            allowed: d.is_allowed(),
            remaining: d.remaining,
            retry_after: d.retry_after,
            delay: d.delay(),
        }
    }
}

/// The events of a batch: `event(i)` is event `i`'s `(now, cost)` (any such closure).
pub trait Events: FnMut(usize) -> (Nanos, u64) {}
impl<F: FnMut(usize) -> (Nanos, u64)> Events for F {}

/// Where a batch hands outcome `i` (any such closure).
pub trait Outcomes: FnMut(usize, Result<BatchDecision, InsufficientCapacity>) {}
impl<F: FnMut(usize, Result<BatchDecision, InsufficientCapacity>)> Outcomes for F {}

/// A lock-free limiter that decides a run of events with one CAS per [`BATCH`]; see the
/// [module docs](self).
pub trait BatchAcquire {
    /// Whether an outcome can carry a non-zero [`BatchDecision::delay`] (only a leaky
    /// bucket delays), so a caller can skip that column otherwise.
    const DELAYS: bool = false;

    /// Decides events `0..len` in order, as `acquire(event(i))` would one by one, and
    /// hands each outcome to `write(i, ..)`.
    ///
    /// When a commit fails, the batch is decided again per event, so `event` and `write`
    /// may be called more than once for an index: the last `write` for an index is its
    /// outcome, and `event` must return the same event each time. A committed batch is
    /// atomic with respect to other calls on this limiter; a redone one is as atomic as
    /// `acquire` per event.
    fn acquire_batch<E: Events, W: Outcomes>(&self, len: usize, event: E, write: W);
}

/// The driver every `acquire_batch` shares: for each batch `a..b`, load `word`, run
/// `local(s0, a, b, ..)` (the events on a local copy: the new word and whether any step
/// changed it), commit by CAS when something changed, and on a lost CAS decide the events
/// again, one `acquire` each.
#[inline(always)]
pub(crate) fn run_batches<E, W, L, A>(
    word: &AtomicU64,
    len: usize,
    mut event: E,
    mut write: W,
    mut local: L,
    acquire: A,
) where
    E: Events,
    W: Outcomes,
    L: FnMut(u64, usize, usize, &mut E, &mut W) -> (u64, bool),
    A: Fn(Nanos, u64) -> Result<Decision, InsufficientCapacity>,
{
    let mut a = 0;
    while a < len {
        let b = len.min(a + BATCH);
        let s0 = word.load(Ordering::Relaxed);
        let (s, wrote) = local(s0, a, b, &mut event, &mut write);
        // A batch that changed nothing is linearised at its load. One that did commits
        // even when its word came back to `s0`: a CAS, so a concurrent write in between
        // is never overwritten.
        let committed = !wrote
            || word
                .compare_exchange(s0, s, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if !committed {
            acquire_each(a, b, &mut event, &mut write, &acquire);
        }
        a = b;
    }
}

/// Events `a..b` one `acquire` each: the fallback of a failed batch commit.
#[cold]
#[inline(never)]
fn acquire_each<E: Events, W: Outcomes, A>(
    a: usize,
    b: usize,
    event: &mut E,
    write: &mut W,
    acquire: &A,
) where
    A: Fn(Nanos, u64) -> Result<Decision, InsufficientCapacity>,
{
    for i in a..b {
        let (now, cost) = event(i);
        write(i, acquire(now, cost).map(BatchDecision::from));
    }
}

#[cfg(test)]
mod tests {
    extern crate alloc;

    use super::*;
    use crate::{SharedFixedWindow, SharedLeakyBucket, SharedSlidingWindow, SharedTokenBucket};

    const S: u64 = 1_000_000_000;

    /// What the tests need of a shared limiter with a batch: its per-event `acquire`, its
    /// word, and its capacity.
    trait Probe: BatchAcquire {
        fn each(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity>;
        fn raw(&self) -> u64;
        fn cap(&self) -> u64;
    }
    macro_rules! probe {
        ($($t:ty),*) => {$(
            impl Probe for $t {
                fn each(&self, now: Nanos, cost: u64) -> Result<Decision, InsufficientCapacity> {
                    self.acquire(now, cost)
                }
                fn raw(&self) -> u64 {
                    self.raw_state()
                }
                fn cap(&self) -> u64 {
                    crate::SharedRateLimiter::capacity(self)
                }
            }
        )*};
    }
    probe!(
        SharedTokenBucket,
        SharedLeakyBucket,
        SharedFixedWindow,
        SharedSlidingWindow
    );

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed | 1;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// Random events around a period `p`: mostly forward steps, some rewinds, some u64
    /// extremes; costs 0, 1, the capacity and one above it.
    fn events(seed: u64, p: u64, cap: u64, n: usize) -> alloc::vec::Vec<(u64, u64)> {
        let mut next = xorshift(seed);
        let mut t = 0u64;
        (0..n)
            .map(|_| {
                let r = next();
                t = match r % 16 {
                    0 => t.saturating_sub(r >> 40),
                    1 => [0, u64::MAX, u64::MAX / 2, r][(r >> 8) as usize % 4],
                    _ => t.saturating_add((r >> 20) % (p / 2 + 2)),
                };
                let cost = match (r >> 4) % 8 {
                    0 => 0,
                    1 => cap,
                    2 => cap.saturating_add(1),
                    3 => (r >> 32) % (cap.saturating_add(2)),
                    _ => 1,
                };
                (t, cost)
            })
            .collect()
    }

    /// `acquire_batch` on `batch` == per-event `acquire` on `each` (twins in the same
    /// state), outcome for outcome and in the final word.
    fn batch_equals_each<L: Probe>(batch: &L, each: &L, events: &[(u64, u64)]) {
        crate::test_support::assert_batch_matches(
            events,
            |n, event, write| batch.acquire_batch(n, event, write),
            |t, c| each.each(t, c),
        );
        assert_eq!(batch.raw(), each.raw(), "final word");
    }

    fn check_random<L: Probe>(make: impl Fn() -> L, p: u64) {
        let n = if cfg!(miri) { 40 } else { 600 };
        for seed in 1..if cfg!(miri) { 2 } else { 12 } {
            let (batch, each) = (make(), make());
            // A random start state first (the same on both).
            for &(t, c) in &events(seed ^ 0xABCD, p, batch.cap(), 20) {
                assert_eq!(batch.each(Nanos(t), c), each.each(Nanos(t), c));
            }
            batch_equals_each(&batch, &each, &events(seed, p, batch.cap(), n));
            // Then short calls: batches whose only write may be one event's.
            let evs = events(seed ^ 0x5555, p, batch.cap(), n);
            for part in evs.chunks(1 + seed as usize % 4) {
                batch_equals_each(&batch, &each, part);
            }
        }
    }

    #[test]
    fn every_batch_equals_acquire_per_event() {
        for (r, p, b) in [
            (3u64, S, 5u64),
            (5000, S, 100),
            (1_000_000_007, S, 9),
            (7, 3, 2),
        ] {
            check_random(
                || SharedTokenBucket::new(r, Nanos(p), b).unwrap(),
                p / r.min(p),
            );
            for (d, nd) in [(0, false), (b / 2, false), (b, false), (0, true)] {
                let lb = || SharedLeakyBucket::new(r, Nanos(p), b, d, nd).unwrap();
                check_random(lb, p / r.min(p));
            }
        }
        check_random(
            || SharedLeakyBucket::new(u64::MAX, Nanos(1), 0, 0, false).unwrap(),
            1,
        );
        check_random(
            || SharedLeakyBucket::new(1, Nanos(1), (1 << 62) - 1, 7, false).unwrap(),
            1,
        );
        for (l, w) in [(1u64, 1u64), (3, S), (5000, S), (14, 15), (100, 7)] {
            check_random(|| SharedFixedWindow::new(l, Nanos(w)).unwrap(), w);
            check_random(|| SharedSlidingWindow::new(l, Nanos(w)).unwrap(), w);
        }
        check_random(
            || SharedFixedWindow::new(u32::MAX as u64, Nanos(u64::MAX)).unwrap(),
            S,
        );
        let max = crate::window::MAX_SLIDING_LIMIT;
        check_random(
            || SharedSlidingWindow::new(max, Nanos(u64::MAX)).unwrap(),
            u64::MAX,
        );
        check_random(|| SharedSlidingWindow::new(max, Nanos(1)).unwrap(), 1);
    }

    /// The first outcome written makes another call write the word (as a concurrent thread
    /// would between the batch's load and its CAS): the CAS fails and the batch is decided
    /// again after that call, per event. `events` must change the word; `meddle` is the
    /// interfering acquisition.
    fn lost_commit_is_redone<L: Probe>(
        make: impl Fn() -> L,
        events: &[(u64, u64)],
        meddle: (u64, u64),
    ) {
        let lim = make();
        let mut meddled = false;
        let mut got = std::vec![None; events.len()];
        lim.acquire_batch(
            events.len(),
            |i| (Nanos(events[i].0), events[i].1),
            |i, d| {
                if !meddled {
                    meddled = true;
                    assert!(lim.each(Nanos(meddle.0), meddle.1).unwrap().is_allowed());
                }
                got[i] = Some(d);
            },
        );
        let twin = make();
        twin.each(Nanos(meddle.0), meddle.1).unwrap();
        for (i, &(t, c)) in events.iter().enumerate() {
            let want = twin.each(Nanos(t), c).map(BatchDecision::from);
            assert_eq!(got[i], Some(want), "event {i}");
        }
        assert_eq!(lim.raw(), twin.raw());
    }

    #[test]
    fn lost_commits_are_redone() {
        let lb = || SharedLeakyBucket::new(1, Nanos(S), 2, 0, false).unwrap();
        lost_commit_is_redone(lb, &[(0, 1), (0, 1), (0, 1), (0, 1)], (0, 1));
        let fw = || SharedFixedWindow::new(3, Nanos(S)).unwrap();
        lost_commit_is_redone(fw, &[(0, 1), (1, 1), (2, 1), (3, 1)], (0, 1));
        let sw = || SharedSlidingWindow::new(3, Nanos(S)).unwrap();
        lost_commit_is_redone(sw, &[(0, 1), (1, 1), (2, 1), (3, 1)], (0, 1));
        // Whose word comes back to the loaded one: still a CAS, still lost. Leaky bucket:
        // T = W = 2^62 units (k = 1), 0 → 2^62 → 3·2^62 + 2^62 = 0. Windows: a cost 0 two
        // windows later packs all-zero counts, the fresh word 0.
        let lb = || SharedLeakyBucket::new(1, Nanos(1 << 62), 0, 0, false).unwrap();
        lost_commit_is_redone(lb, &[(0, 1), (3 << 62, 1)], (0, 1));
        let fw = || SharedFixedWindow::new(3, Nanos(S)).unwrap();
        lost_commit_is_redone(fw, &[(0, 1), (2 * S, 0)], (0, 1));
        let sw = || SharedSlidingWindow::new(3, Nanos(S)).unwrap();
        lost_commit_is_redone(sw, &[(0, 1), (2 * S, 0)], (0, 1));
    }

    #[test]
    fn a_batch_whose_only_write_is_late_commits() {
        // The first event writes nothing (cost 0, or a rejection); a later one admits.
        // Twins from `make`, one unit taken at 0 on each, then the batch.
        fn after_one<L: Probe>(make: impl Fn() -> L, events: &[(u64, u64)]) {
            let (a, b) = (make(), make());
            a.each(Nanos(0), 1).unwrap();
            b.each(Nanos(0), 1).unwrap();
            batch_equals_each(&a, &b, events);
        }
        for first in [(1, 0), (1, 2)] {
            let events = [first, (2, 1)];
            after_one(|| SharedSlidingWindow::new(2, Nanos(S)).unwrap(), &events);
            after_one(|| SharedFixedWindow::new(2, Nanos(S)).unwrap(), &events);
        }
        let (a, b) = (
            SharedLeakyBucket::new(1, Nanos(S), 1, 0, false).unwrap(),
            SharedLeakyBucket::new(1, Nanos(S), 1, 0, false).unwrap(),
        );
        batch_equals_each(&a, &b, &[(0, 0), (0, 3), (0, 1)]);
    }

    #[test]
    fn a_batch_that_writes_nothing_does_not_commit() {
        // Nothing accepted, nothing normalised: no CAS (the word is untouched), and an
        // empty batch calls nothing.
        let lb = SharedLeakyBucket::new(1, Nanos(S), 0, 0, false).unwrap();
        lb.acquire(Nanos(0), 1).unwrap();
        let before = lb.raw_state();
        lb.acquire_batch(3, |_| (Nanos(0), 1), |_, d| assert!(!d.unwrap().allowed));
        assert_eq!(lb.raw_state(), before);
        let fw = SharedFixedWindow::new(1, Nanos(S)).unwrap();
        fw.acquire_batch(0, |_| unreachable!(), |_, _| unreachable!());
        assert_eq!(fw.raw_state(), 0);
    }
}
