//! The physical floor of a shared limiter: one uncontended CAS loop on one `AtomicU64`.
//! Every suite puts it first in its group (row `floor_cas_loop`) so the table's ratio
//! column reads "× the floor".

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

/// One increment through a `compare_exchange_weak` loop (what a shared GCRA does at least).
#[inline]
pub fn cas_step(a: &AtomicU64) -> u64 {
    let mut cur = a.load(Ordering::Relaxed);
    loop {
        match a.compare_exchange_weak(
            cur,
            black_box(cur.wrapping_add(1)),
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => return cur,
            Err(v) => cur = v,
        }
    }
}
