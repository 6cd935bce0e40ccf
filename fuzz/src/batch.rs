//! The batch checks the limiter targets share: acquisitions recorded with `acquire`'s
//! outcome, replayed through `acquire_batch` on a copy and compared.

use weir_core::{BatchAcquire, BatchDecision, InsufficientCapacity, Nanos};

/// One acquisition for a batch copy: `(now, cost, acquire's outcome)`.
pub type Pending = (u64, u64, Result<BatchDecision, InsufficientCapacity>);

/// Runs `pending` through `batch` (an `acquire_batch`) and checks each outcome against
/// `acquire`'s; the caller compares the states.
pub fn flush(
    pending: &mut Vec<Pending>,
    what: &str,
    batch: impl FnOnce(&[Pending], &mut [Option<Result<BatchDecision, InsufficientCapacity>>]),
) {
    let mut got = vec![None; pending.len()];
    batch(pending, &mut got);
    for (i, &(t, c, want)) in pending.iter().enumerate() {
        assert_eq!(
            got[i],
            Some(want),
            "{what} acquire_batch event {i} at {t}, cost {c}"
        );
    }
    pending.clear();
}

/// A shared limiter's batch copy: flushes `pending` into it and compares its state word
/// with its twin's (`shared`, already past them).
pub fn flush_shared<B: BatchAcquire>(
    pending: &mut Vec<Pending>,
    what: &str,
    batch: &B,
    shared: &B,
    word: fn(&B) -> u64,
) {
    flush(pending, what, |p, got| {
        batch.acquire_batch(
            p.len(),
            |i| (Nanos(p[i].0), p[i].1),
            |i, d| got[i] = Some(d),
        );
    });
    assert_eq!(word(batch), word(shared), "{what} acquire_batch state");
}
