//! A global allocator wrapper that counts live bytes, so a suite can report the bytes of
//! state per key of a keyed limiter (register it with `#[global_allocator]` in the suite).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// `System`, counting live bytes.
pub struct CountingAlloc;

// SAFETY: forwards to `System` unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, new) }
    }
}

/// Live heap bytes (only meaningful with [`CountingAlloc`] registered).
pub fn allocated_bytes() -> isize {
    LIVE.load(Ordering::Relaxed)
}
