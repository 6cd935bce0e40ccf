//! `[routes.concurrency]`: the file model, the compiled policy and its compile step.

use crate::check::{Ctx, R, at_least_1, file_table, nonzero_dur_or};
use crate::dur::Dur;
use serde::Serialize;

/// `[routes.concurrency]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConcurrencyPolicy {
    /// Permits.
    pub max: u64,
    /// Waiting requests allowed (0 = reject at once).
    pub queue: u64,
    /// Longest wait in the queue (default: the route's total timeout).
    pub queue_timeout: Dur,
}

file_table! {
    RawConcurrency {
        max: u64,
        queue: Option<u64>,
        queue_timeout: Option<Dur>,
    }
}

/// The compile step at key prefix `k`; `total` is the route's total timeout.
pub(crate) fn compile(
    k: &str,
    c: RawConcurrency,
    total: Dur,
    ctx: &Ctx<'_>,
) -> R<ConcurrencyPolicy> {
    Ok(ConcurrencyPolicy {
        max: at_least_1(ctx, &format!("{k}.max"), c.max)?,
        queue: c.queue.unwrap_or(0),
        // `total` is already checked: the same as checking only a given value.
        queue_timeout: nonzero_dur_or(ctx, &format!("{k}.queue_timeout"), c.queue_timeout, total)?,
    })
}

/// What `--check` prints.
pub(crate) fn describe(c: &ConcurrencyPolicy) -> String {
    format!(
        "max {}, queue {}, queue_timeout {}",
        c.max, c.queue, c.queue_timeout
    )
}
