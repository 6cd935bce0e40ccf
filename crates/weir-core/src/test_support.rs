//! What the unit tests of several modules share (compiled for tests only; also included
//! by `tests/differential.rs`, whose crate root imports the same names from `weir_core`).

use crate::{BatchDecision, InsufficientCapacity, Nanos};

/// One outcome of `acquire_batch`.
pub(crate) type Outcome = Result<BatchDecision, InsufficientCapacity>;

/// One `acquire_batch` over `events` (`batch(len, event, write)`) == `each` (`acquire` on
/// a twin in the same state) event by event, outcome for outcome.
pub(crate) fn assert_batch_matches<D>(
    events: &[(u64, u64)],
    batch: impl FnOnce(usize, &mut dyn FnMut(usize) -> (Nanos, u64), &mut dyn FnMut(usize, Outcome)),
    mut each: impl FnMut(Nanos, u64) -> Result<D, InsufficientCapacity>,
) where
    BatchDecision: From<D>,
{
    let mut got = std::vec![None; events.len()];
    batch(
        events.len(),
        &mut |i| (Nanos(events[i].0), events[i].1),
        &mut |i, d| got[i] = Some(d),
    );
    for (i, &(t, c)) in events.iter().enumerate() {
        let want = each(Nanos(t), c).map(BatchDecision::from);
        assert_eq!(got[i], Some(want), "event {i} at {t}, cost {c}");
    }
}
