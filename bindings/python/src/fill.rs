//! The replay step every limiter class implements ([`PyLimiter`]): one chunk of a trace
//! through the core's batch step, written into the result columns ([`Fill`]).
//!
//! Apart from `replay.rs` (the trace, its columns and the Python entry point), which
//! dispatches over the limiter classes, so that `limiters.rs` can implement the step
//! without importing the module that imports it.

use crate::time::{TWO52, TimeSource, round_ns, round_small};
use weir_core::{BatchAcquire, BatchDecision, InsufficientCapacity, Nanos, SlidingLog};

/// Bytes of result per event: `remaining` u64, `wait` f64, `allowed` u8. `wait` is
/// `retry_after` for a rejected event and `delay` for an admitted one (at most one of the
/// two is non-zero), so both columns fit in one; [`_split_wait`](crate::replay::_split_wait) separates them on demand.
pub(crate) const BYTES_PER_EVENT: usize = 17;

/// Implemented by every limiter class, so `replay` can drive any of them.
pub(crate) trait PyLimiter: Sync {
    fn time(&self) -> &TimeSource;
    /// The largest admissible cost.
    fn capacity(&self) -> u64;
    /// Replays one chunk through the core's batch step: `(admitted, delayed, last time)`.
    fn fill(&self, f: Fill<'_>) -> (u64, u64, Nanos);
}

/// The replay loop over one chunk: decisions written into the column layout of
/// [`BYTES_PER_EVENT`]. Every byte of the three slices is written (they may hold the
/// previous chunk's figures).
pub(crate) struct Fill<'a> {
    /// `k` native f64 seconds, all `>= 0` (validated).
    pub(crate) times: &'a [u8],
    /// `k` native u64 costs, all within the capacity (validated), or all 1.
    pub(crate) costs: Option<&'a [u8]>,
    /// Scratch of at least `k` items: the times in nanoseconds.
    pub(crate) ns: &'a mut [u64],
    /// The chunk's `8·k` bytes of the `remaining` column.
    pub(crate) rem: &'a mut [u8],
    /// The chunk's `8·k` bytes of the `wait` column.
    pub(crate) wait: &'a mut [u8],
    /// The chunk's `k` bytes of the `allowed` column.
    pub(crate) allowed: &'a mut [u8],
}

/// A core with an `acquire_batch`: the lock-free limiters ([`BatchAcquire`], one CAS per
/// batch of events) and the single-owner sliding log (under the caller's lock).
pub(crate) trait Batched {
    /// [`BatchAcquire::DELAYS`]: whether the `wait` column may hold a delay.
    const DELAYS: bool;
    fn batch<E, W>(self, len: usize, event: E, write: W)
    where
        E: FnMut(usize) -> (Nanos, u64),
        W: FnMut(usize, Result<BatchDecision, InsufficientCapacity>);
}

/// `Batched` for a limiter reference whose `acquire_batch` has that signature.
macro_rules! batched_by_acquire_batch {
    ($([$($g:tt)*] $ty:ty => $delays:expr;)+) => {$(
        impl<$($g)*> Batched for $ty {
            const DELAYS: bool = $delays;
            #[inline(always)]
            fn batch<E, W>(self, len: usize, event: E, write: W)
            where
                E: FnMut(usize) -> (Nanos, u64),
                W: FnMut(usize, Result<BatchDecision, InsufficientCapacity>),
            {
                self.acquire_batch(len, event, write);
            }
        }
    )+};
}

batched_by_acquire_batch! {
    [B: BatchAcquire] &B => B::DELAYS;
    [const N: usize] &mut SlidingLog<N> => false;
}

impl Fill<'_> {
    /// The chunk through the core's `acquire_batch` ([`Batched`]: every limiter): the same
    /// decisions as per-event `acquire`, without building a `Decision` per event.
    ///
    /// The times are converted to nanoseconds first ([`chunk_nanos`]: a plain loop over the
    /// chunk, which the compiler vectorises); inside the decision loop the rounding's float
    /// chain would lengthen every event's critical path. (Converting the waits to seconds
    /// in a second pass as well measured slower: the division overlaps with the decisions.)
    #[inline]
    pub(crate) fn batch<B: Batched>(self, core: B) -> (u64, u64, Nanos) {
        let (costs, ns, allowed) = (self.costs, self.ns, self.allowed);
        let (times, _) = self.times.as_chunks::<8>();
        let (rem, _) = self.rem.as_chunks_mut::<8>();
        let (wait, _) = self.wait.as_chunks_mut::<8>();
        let k = allowed.len();
        let ns = &mut ns[..k];
        chunk_nanos(times, ns);
        let ns = &*ns;
        let write = |i: usize, r: Result<BatchDecision, InsufficientCapacity>| {
            let d = r.unwrap_or(BatchDecision {
                allowed: false,
                remaining: 0,
                retry_after: Nanos::MAX,
                delay: Nanos::ZERO,
            });
            rem[i] = d.remaining.to_ne_bytes();
            // At most one of the two is non-zero (see BYTES_PER_EVENT); without delays
            // `retry_after` is zero when allowed.
            let w = if B::DELAYS && d.allowed {
                d.delay
            } else {
                d.retry_after
            };
            wait[i] = secs(w).to_ne_bytes();
            allowed[i] = d.allowed as u8;
        };
        match costs {
            None => core.batch(k, |i| (Nanos(ns[i]), 1), write),
            Some(c) => {
                let (c, _) = c.as_chunks::<8>();
                core.batch(k, |i| (Nanos(ns[i]), u64::from_ne_bytes(c[i])), write)
            }
        }
        // Counted afterwards, over the final outcomes (a redone batch writes twice).
        let admitted = allowed.iter().map(|&a| u64::from(a)).sum();
        let delayed = if B::DELAYS {
            allowed
                .iter()
                .zip(wait.iter())
                .map(|(&a, w)| u64::from(a != 0 && f64::from_ne_bytes(*w) != 0.0))
                .sum()
        } else {
            0
        };
        let last = ns.last().map_or(Nanos::ZERO, |&n| Nanos(n));
        (admitted, delayed, last)
    }
}

/// `ns[i] = round_ns(times[i] · 1e9)` for a chunk. When every product is below 2^52 (any
/// trace shorter than 52 days), [`round_small`] for all of them: a loop without branches,
/// which vectorises; otherwise `round_ns` itself per event.
fn chunk_nanos(times: &[[u8; 8]], ns: &mut [u64]) {
    let mut small = true;
    for t in times {
        small &= f64::from_ne_bytes(*t) * 1e9 < TWO52;
    }
    // Two loops, so the common one has no branch at all.
    if small {
        for (n, t) in ns.iter_mut().zip(times) {
            *n = round_small(f64::from_ne_bytes(*t) * 1e9);
        }
    } else {
        for (n, t) in ns.iter_mut().zip(times) {
            *n = round_ns(f64::from_ne_bytes(*t) * 1e9).0;
        }
    }
}

/// [`Nanos::as_secs_f64`], bit for bit: below 2^63 (every `retry_after` of a token
/// bucket: the core's numerators are below 2^63; in practice every other one too) the
/// integer converts with one signed `cvtsi2sd` instead of the unsigned sequence. The rest
/// goes out of line, so the compiler cannot merge the two into the unsigned sequence.
#[inline(always)]
fn secs(n: Nanos) -> f64 {
    match i64::try_from(n.0) {
        Ok(i) => i as f64 / 1e9,
        Err(_) => secs_wide(n),
    }
}

/// [`secs`] from 2^63 ns on.
#[cold]
#[inline(never)]
fn secs_wide(n: Nanos) -> f64 {
    n.as_secs_f64()
}
