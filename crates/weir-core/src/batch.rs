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

/// A lock-free limiter that decides a run of events with one CAS per [`BATCH`]; see the
/// [module docs](self).
pub trait BatchAcquire {
    /// Decides events `0..len` in order, as `acquire(event(i))` would one by one, and
    /// hands each outcome to `write(i, ..)`.
    ///
    /// When a commit fails, the batch is decided again per event, so `event` and `write`
    /// may be called more than once for an index: the last `write` for an index is its
    /// outcome, and `event` must return the same event each time. A committed batch is
    /// atomic with respect to other calls on this limiter; a redone one is as atomic as
    /// `acquire` per event.
    fn acquire_batch<E, W>(&self, len: usize, event: E, write: W)
    where
        E: FnMut(usize) -> (Nanos, u64),
        W: FnMut(usize, Result<BatchDecision, InsufficientCapacity>);
}

/// The driver every `acquire_batch` shares: for each batch `a..b`, load `word`, run
/// `local(s0, a, b, ..)` (the events on a local copy: the new word and whether any step
/// changed it), commit by CAS when something changed, and on a lost CAS run `each(a, b, ..)`
/// (the events again, one `acquire` each).
#[inline(always)]
pub(crate) fn run_batches<E, W, L, F>(
    word: &AtomicU64,
    len: usize,
    mut event: E,
    mut write: W,
    mut local: L,
    mut each: F,
) where
    E: FnMut(usize) -> (Nanos, u64),
    W: FnMut(usize, Result<BatchDecision, InsufficientCapacity>),
    L: FnMut(u64, usize, usize, &mut E, &mut W) -> (u64, bool),
    F: FnMut(usize, usize, &mut E, &mut W),
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
            each(a, b, &mut event, &mut write);
        }
        a = b;
    }
}
