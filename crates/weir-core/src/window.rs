//! Fixed window and sliding-window counter.
//!
//! # Why two (three, with [`crate::sliding_log`])
//! Windows are what users write in an API contract ("100 requests per minute"), and each
//! flavour trades memory for error:
//! * **fixed window** counts admissions per aligned window `[i·W, (i+1)·W)`. One counter,
//!   but a client can spend `limit` at the end of a window and `limit` again at the start of
//!   the next: up to `2·limit` in any interval of length `W`.
//! * **sliding-window counter** (Cloudflare's "weighted two buckets") estimates the count
//!   over the last `W` as `prev·(W − e)/W + cur`, where `e` is the time elapsed in the current
//!   window. We round the weighted part **up** (`⌈prev·(W − e)/W⌉`), so we never admit more
//!   than the real-valued estimate. The estimate itself assumes `prev` was spread evenly; if
//!   it was concentrated at the end of the previous window the counter can still admit up to
//!   `limit + prev·e/W < 2·limit` in some interval of length `W`. Use the exact
//!   [`crate::SlidingLog`] when that matters.
//!
//! # State and horizon
//! Both forms use one packed `u64`: the window index modulo `2^ib` and the count(s), each
//! count in `cb = bits(limit)` bits (`ib = 64 − cb`, or `64 − 2·cb` for the counter). The
//! single-owner forms use the same packed word so that shared == single-owner always. The
//! stored index is compared with the current one serial-number style: a difference of
//! `0 < d < 2^(ib−1)` windows is "newer"; larger differences are a clock rewind, evaluated
//! as "no time passed" (the stored window keeps counting, elapsed time is taken as zero:
//! conservative). Every acquisition (cost 0 and rejections included) writes back the
//! window it evaluated (a peek writes nothing), so the stored window is the latest one
//! still counting. Decisions are exact while it is less than `2^(ib−1)` windows from the
//! current one in either direction; without rewinds, while consecutive acquisitions are
//! less than `2^(ib−1)` windows apart ([`FixedWindowConfig::horizon`]; 2^31 windows even at
//! the largest limit 2^32−1 for fixed windows, `2^(63−2·cb)` for the counter: 2^49 windows
//! at limit 100, 2^15 windows at the largest limit 2^24−1). A state whose counts are all
//! zero is fresh whatever its index. Beyond the horizon, an idle gap may read as a rewind
//! (the limiter under-admits until the gap reads as newer again), and a rewind by more
//! than the horizon reads as time passing (the window restarts).
//!
//! # Decisions
//! `remaining = limit − count` (counter: minus the rounded estimate); `retry_after` for a
//! rejection = time until this cost fits (fixed: the window end; counter: computed exactly
//! from the weights, at most two windows); `reset_after` = time until `remaining` grows
//! (fixed: window end; counter: until the weighted previous count drops by one, or the
//! current count starts to age out), zero when empty.
//!
//! ```
//! use weir_core::{FixedWindow, Nanos, SlidingWindow};
//! let mut fw = FixedWindow::new(2, Nanos::from_secs(1)).unwrap();
//! assert!(fw.acquire(Nanos::from_millis(900), 2).unwrap().is_allowed());
//! let d = fw.acquire(Nanos::from_millis(950), 1).unwrap();
//! assert!(!d.is_allowed());
//! assert_eq!(d.retry_after, Nanos::from_millis(50));
//! let mut sw = SlidingWindow::new(2, Nanos::from_secs(1)).unwrap();
//! assert!(sw.acquire(Nanos::from_millis(900), 2).unwrap().is_allowed());
//! // At 1.5 s, half of the previous window still counts: ⌈2 · 0.5⌉ = 1 → 1 left.
//! assert_eq!(sw.peek(Nanos::from_millis(1500), 0).unwrap().remaining, 1);
//! ```

use crate::arith::{Divider, HALF};
use crate::batch::{BatchDecision, Events, Outcomes};
use crate::decision::{Decision, InsufficientCapacity, Verdict};
use crate::error::ParamError;
use crate::limiter::{Algorithm, Limiter, WordStep, acquire_word, peek_word};
use crate::shared::LocalRun;
pub use crate::shared::Shared;
use crate::time::Nanos;

/// `Some(new)` when a step changed the word. Every step writes its normalised word back
/// (also for cost 0 and rejections), so the stored index follows the calls and the horizon
/// is measured between consecutive acquisitions, not from the last admission.
const fn changed(old: u64, new: u64) -> Option<u64> {
    if old == new { None } else { Some(new) }
}

/// Where the current window stands relative to the stored one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rel {
    /// The same window.
    Same,
    /// The next window.
    Next,
    /// Two or more windows later (all counts expired).
    Later,
    /// The stored window is ahead (clock rewind): evaluate in the stored window at its start.
    Rewind,
}

/// Packing of window index and counts in one `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packing {
    /// Bits per count.
    cb: u32,
    /// Number of counts packed (1 or 2).
    counts: u32,
}

impl Packing {
    const fn ib(self) -> u32 {
        64 - self.cb * self.counts
    }
    const fn idx_mask(self) -> u64 {
        if self.ib() == 64 {
            u64::MAX
        } else {
            (1u64 << self.ib()) - 1
        }
    }
    const fn cmask(self) -> u64 {
        (1u64 << self.cb) - 1
    }
    const fn idx(self, w: u64) -> u64 {
        w >> (self.cb * self.counts)
    }
    const fn c0(self, w: u64) -> u64 {
        w & self.cmask()
    }
    const fn c1(self, w: u64) -> u64 {
        (w >> self.cb) & self.cmask()
    }
    /// The word for `idx` and counts; all-zero counts pack to `0` (fresh whatever the
    /// index), so an empty state never needs a write.
    const fn pack(self, idx: u64, c0: u64, c1: u64) -> u64 {
        if c0 == 0 && c1 == 0 {
            return 0;
        }
        ((idx & self.idx_mask()) << (self.cb * self.counts)) | (c1 << self.cb) | c0
    }
    /// Relation of the current index `now_idx` to the stored one.
    const fn rel(self, stored: u64, now_idx: u64) -> Rel {
        let d = now_idx.wrapping_sub(stored) & self.idx_mask();
        let half = 1u64 << (self.ib() - 1);
        if d == 0 {
            Rel::Same
        } else if d == 1 {
            Rel::Next
        } else if d < half {
            Rel::Later
        } else {
            Rel::Rewind
        }
    }
    /// The full index of the stored window when it is ahead of `now_idx` (rewind).
    const fn ahead_index(self, stored: u64, now_idx: u64) -> u64 {
        let d = stored.wrapping_sub(now_idx) & self.idx_mask();
        now_idx.saturating_add(d)
    }
}

const fn bits(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// Shared validation for both windows.
const fn check_window(limit: u64, window: Nanos, max_limit: u64) -> Result<(), ParamError> {
    if limit == 0 {
        return Err(ParamError::Zero("limit"));
    }
    if window.0 == 0 {
        return Err(ParamError::Zero("window"));
    }
    if limit > max_limit {
        return Err(ParamError::TooLarge("limit"));
    }
    Ok(())
}

const fn capacity_check(limit: u64, cost: u64) -> Result<(), InsufficientCapacity> {
    if cost > limit {
        Err(InsufficientCapacity {
            cost,
            capacity: limit,
        })
    } else {
        Ok(())
    }
}

/// `(i + 1)·W − now`, saturating: time until the end of window `i`.
const fn until_end(i: u64, window: u64, now: u64) -> u64 {
    let end = (i as u128 + 1) * window as u128;
    let d = end.saturating_sub(now as u128);
    if d > u64::MAX as u128 {
        u64::MAX
    } else {
        d as u64
    }
}

// ---------------------------------------------------------------------------------------
// Fixed window

/// Largest fixed-window limit.
pub const MAX_FIXED_LIMIT: u64 = u32::MAX as u64;

/// Validated fixed-window parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindowConfig {
    limit: u64,
    window: Divider,
    p: Packing,
}

/// A fixed-window state word (window index mod 2^ib, count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WindowState(pub u64);

/// The constructor and accessors both window configurations share (`counts`: how many
/// counts the word packs).
macro_rules! window_config {
    ($cfg:ident, $max:expr, $counts:expr, $doc:literal) => {
        impl $cfg {
            #[doc = $doc]
            pub const fn new(limit: u64, window: Nanos) -> Result<Self, ParamError> {
                if let Err(e) = check_window(limit, window, $max) {
                    return Err(e);
                }
                Ok($cfg {
                    limit,
                    window: Divider::new(window.0),
                    p: Packing {
                        cb: bits(limit),
                        counts: $counts,
                    },
                })
            }
            /// The limit per window.
            pub const fn limit(&self) -> u64 {
                self.limit
            }
            /// The window length.
            pub const fn window(&self) -> Nanos {
                Nanos(self.window.divisor())
            }
            /// Windows between calls within which decisions are exact (see the module docs).
            pub const fn horizon(&self) -> u64 {
                1u64 << (self.p.ib() - 1)
            }
        }
    };
}

window_config!(
    FixedWindowConfig,
    MAX_FIXED_LIMIT,
    1,
    "`limit` admissions per aligned `window`; `limit ≤ 2^32 − 1`."
);

impl FixedWindowConfig {
    /// The lean step on a packed word: `(allowed, remaining, time to the window end, new
    /// word, the new word's full window index)` — everything but the [`Decision`] built
    /// around it.
    #[inline(always)]
    fn lean(&self, word: u64, now: Nanos, cost: u64) -> (bool, u64, Nanos, u64, u64) {
        let p = self.p;
        let w = self.window.divisor();
        let (idx, count) = self.counting(word, now);
        let end = Nanos(until_end(idx, w, now.0));
        let fits = count + cost <= self.limit;
        let after = if fits { count + cost } else { count };
        (fits, self.limit - after, end, p.pack(idx, after, 0), idx)
    }

    /// The window still counting at `now` (its full index) and its count.
    #[inline(always)]
    fn counting(&self, word: u64, now: Nanos) -> (u64, u64) {
        let p = self.p;
        let now_idx = self.window.div(now.0);
        let c = p.c0(word);
        if c == 0 {
            return (now_idx, 0);
        }
        let stored = p.idx(word);
        match p.rel(stored, now_idx) {
            Rel::Same => (now_idx, c),
            Rel::Next | Rel::Later => (now_idx, 0),
            Rel::Rewind => (p.ahead_index(stored, now_idx), c),
        }
    }

    /// The pure step on a packed word: decision and new word.
    #[inline]
    fn step(&self, word: u64, now: Nanos, cost: u64) -> (Decision, Option<u64>) {
        let (fits, remaining, end, new, _) = self.lean(word, now, cost);
        let d = if fits {
            Decision {
                verdict: Verdict::Admit,
                remaining,
                retry_after: Nanos::ZERO,
                reset_after: if remaining == self.limit {
                    Nanos::ZERO
                } else {
                    end
                },
            }
        } else {
            Decision {
                verdict: Verdict::Reject,
                remaining,
                retry_after: end,
                reset_after: end,
            }
        };
        (d, changed(word, new))
    }

    /// [`FixedWindowConfig::step`]'s figures that a batch records, the new word and its
    /// full window index.
    #[inline(always)]
    fn batch_step(&self, word: u64, now: Nanos, cost: u64) -> (BatchDecision, u64, u64) {
        let (fits, remaining, end, new, idx) = self.lean(word, now, cost);
        let d = BatchDecision {
            allowed: fits,
            remaining,
            retry_after: if fits { Nanos::ZERO } else { end },
            delay: Nanos::ZERO,
        };
        (d, new, idx)
    }
}

// ---------------------------------------------------------------------------------------
// Sliding-window counter

/// Largest sliding-window-counter limit.
pub const MAX_SLIDING_LIMIT: u64 = (1 << 24) - 1;

/// Validated sliding-window-counter parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindowConfig {
    limit: u64,
    window: Divider,
    p: Packing,
}

/// The counter's view at one instant.
struct View {
    idx: u64,
    prev: u64,
    cur: u64,
    /// Elapsed in the current window.
    e: u64,
    /// `⌈prev·(W − e)/W⌉`.
    pw: u64,
    /// Time from `now` to the view's instant: zero unless the clock rewound (then the
    /// view is at the start of the stored window, later than `now`).
    base: u64,
}

window_config!(
    SlidingWindowConfig,
    MAX_SLIDING_LIMIT,
    2,
    "`limit` admissions per sliding `window`; `limit ≤ 2^24 − 1`."
);

impl SlidingWindowConfig {
    /// `⌈prev·(W − e)/W⌉`.
    #[inline(always)]
    fn weighted(&self, prev: u64, e: u64) -> u64 {
        let w = self.window.divisor();
        // e < W. Usually the product fits 64 bits: divide by the precomputed divider.
        match prev.checked_mul(w - e) {
            Some(n) => self.window.div_ceil(n),
            None => (prev as u128 * (w - e) as u128).div_ceil(w as u128) as u64,
        }
    }

    /// Earliest elapsed `e' ≥ e` in a window with `prev` at which `⌈prev·(W − e')/W⌉ ≤ target`;
    /// `None` when only at the window end (or later).
    #[inline(always)]
    fn weight_at_most(&self, prev: u64, target: u64) -> Option<u64> {
        let w = self.window.divisor();
        if prev == 0 || target >= prev {
            return Some(0);
        }
        // < w; in 64 bits when the product fits (usually).
        let keep = match target.checked_mul(w) {
            Some(n) => n / prev,
            None => (target as u128 * w as u128 / prev as u128) as u64,
        };
        Some(w - keep).filter(|&e| e < w)
    }

    #[inline(always)]
    fn view(&self, word: u64, now: Nanos) -> View {
        let p = self.p;
        let w = self.window.divisor();
        let now_idx = self.window.div(now.0);
        let (c_prev, c_cur) = (p.c1(word), p.c0(word));
        let e_now = now.0 - now_idx * w;
        let (idx, prev, cur, e, base) = if c_prev == 0 && c_cur == 0 {
            (now_idx, 0, 0, e_now, 0)
        } else {
            let stored = p.idx(word);
            match p.rel(stored, now_idx) {
                Rel::Same => (now_idx, c_prev, c_cur, e_now, 0),
                Rel::Next => (now_idx, c_cur, 0, e_now, 0),
                Rel::Later => (now_idx, 0, 0, e_now, 0),
                Rel::Rewind => {
                    let idx = p.ahead_index(stored, now_idx);
                    let at = idx as u128 * w as u128;
                    let base = at.saturating_sub(now.0 as u128);
                    (
                        idx,
                        c_prev,
                        c_cur,
                        0,
                        u64::try_from(base).unwrap_or(u64::MAX),
                    )
                }
            }
        };
        View {
            idx,
            prev,
            cur,
            e,
            pw: self.weighted(prev, e),
            base,
        }
    }

    /// Time from the view's instant until `pw' + cur' + cost ≤ limit`.
    #[inline(always)]
    fn time_until_fits(&self, v: &View, cost: u64) -> u64 {
        Self::until(self.fit_point(v.prev, v.cur, cost), v.e)
    }

    /// `fit − e`, saturating at both ends (what [`SlidingWindowConfig::time_until_fits`]
    /// computes from a [`SlidingWindowConfig::fit_point`]).
    #[inline(always)]
    fn until(fit: u128, e: u64) -> u64 {
        u64::try_from(fit.saturating_sub(e as u128)).unwrap_or(u64::MAX)
    }

    /// The elapsed time in the view's window (possibly beyond it: in the next one, `W +
    /// e'`) from which `cost` fits with counts `prev` and `cur`, computed without the
    /// view's own elapsed time `e`: the wait is `fit − e`, saturating at 0 (an `e` past
    /// the point: it fits now) and at `u64::MAX`. It depends on the counts and the cost
    /// only, so a batch reuses it across a run of rejections.
    #[inline(always)]
    fn fit_point(&self, prev: u64, cur: u64, cost: u64) -> u128 {
        let w = self.window.divisor();
        if cur + cost <= self.limit
            && let Some(e) = self.weight_at_most(prev, self.limit - cur - cost)
        {
            return e as u128;
        }
        let next = match self.weight_at_most(cur, self.limit - cost) {
            Some(e) => e,
            None => w,
        };
        w as u128 + next as u128
    }

    /// Time from the view's instant until `remaining` (`limit − min(est, limit)`) grows by
    /// one; zero when empty.
    fn time_until_less(&self, v: &View) -> u64 {
        let est = v.pw + v.cur;
        if est == 0 {
            return 0;
        }
        let r0 = self.limit - est.min(self.limit);
        self.time_until_fits(v, r0 + 1)
    }

    /// The step without its times: the view, the offset of the view's instant from `now`,
    /// the verdict, `remaining` and the new word.
    #[inline(always)]
    fn lean(&self, word: u64, now: Nanos, cost: u64) -> (View, u64, bool, u64, u64) {
        let v = self.view(word, now);
        // Times are measured from the view's instant (`base` after `now`).
        let base = v.base;
        let est = v.pw + v.cur;
        let fits = est + cost <= self.limit;
        // By selects, not branches: the verdict flips at random on a trace over the limit.
        // Admitted: `limit − est − cost` (no saturation: it fits); rejected: `limit − est`,
        // saturating (a shrunken weight can leave `est` above the limit after a rewind).
        let taken = if fits { cost } else { 0 };
        let remaining = self.limit.saturating_sub(est + taken);
        let new = self.p.pack(v.idx, v.cur + taken, v.prev);
        (v, base, fits, remaining, new)
    }

    #[inline]
    fn step(&self, word: u64, now: Nanos, cost: u64) -> (Decision, Option<u64>) {
        let (v, base, fits, remaining, new) = self.lean(word, now, cost);
        let d = if fits {
            let after = View {
                cur: v.cur + cost,
                ..v
            };
            Decision {
                verdict: Verdict::Admit,
                remaining,
                retry_after: Nanos::ZERO,
                reset_after: Nanos(match self.time_until_less(&after) {
                    0 => 0,
                    t => base.saturating_add(t),
                }),
            }
        } else {
            Decision {
                verdict: Verdict::Reject,
                remaining,
                retry_after: Nanos(base.saturating_add(self.time_until_fits(&v, cost))),
                reset_after: Nanos(base.saturating_add(self.time_until_less(&v))),
            }
        };
        (d, changed(word, new))
    }

    /// Events `a..b` of a batch on the local word `s` (see `LocalRun::run_local`), with
    /// [`SlidingWindowConfig::step`]'s figures that a batch records (no `reset_after`).
    ///
    /// The word is kept decoded between events: the full index of its window, that
    /// window's start and both counts. An event inside that window (the usual case on a
    /// sorted trace) is then `step` without the division by `W`, the unpacking, the window
    /// relation and the packing — the same integers, since `step` on the packed word sees
    /// the same window (`Rel::Same`, or all counts zero) with `e = now − start` and writes
    /// back `pack(idx, cur + taken, prev)`, which changes the word iff `taken > 0`. Any
    /// other event (the first of the batch, a new window, a rewind) runs `step`'s own
    /// [`SlidingWindowConfig::lean`] on the packed word and decodes the result.
    #[inline(always)]
    fn run_decoded<E: Events, W: Outcomes>(
        &self,
        mut s: u64,
        a: usize,
        b: usize,
        event: &mut E,
        write: &mut W,
    ) -> (u64, bool) {
        let (limit, w, p) = (self.limit, self.window.divisor(), self.p);
        let mut wrote = false;
        // The decoded word; `valid` once an event decoded it and its window start fits.
        let (mut idx, mut start, mut prev, mut cur, mut valid) = (0u64, 0u64, 0u64, 0u64, false);
        // `prev` is fixed within a window: divide by it with a multiply (see below).
        let mut by_prev = Divider::new(1);
        // The last fit point computed on the slow retry path, and its counts and cost.
        let mut memo = ((0u64, 0u64, u64::MAX), 0u128);
        for i in a..b {
            let (now, cost) = event(i);
            if let Err(e) = capacity_check(limit, cost) {
                write(i, Err(e));
                continue;
            }
            let e = now.0.wrapping_sub(start);
            let (fits, remaining, retry) = if valid & (now.0 >= start) & (e < w) {
                let pw = self.weighted(prev, e);
                let est = pw + cur;
                let fits = est + cost <= limit;
                let taken = if fits { cost } else { 0 };
                let remaining = limit.saturating_sub(est + taken);
                // `fit_point(prev, cur, cost)` in its usual case, without a branch or a
                // `div`: `cost` fits this window's count (`t = limit − cur − cost`), and
                // the weight falls to `t` at `e' = W − ⌊t·W / prev⌋` within the window
                // (`0 < keep`), or is already there (`t ≥ prev`: `e' = 0`). Any other case
                // (rare: the window's own count is full, or `t·W` needs 64 bits) takes
                // `fit_point` itself, once per run of rejections with the same counts.
                let t = limit.wrapping_sub(cur).wrapping_sub(cost);
                let (tw, wide) = t.overflowing_mul(w);
                let keep = by_prev.div_lt_half(tw & !HALF);
                let usual = (cur + cost <= limit) & (tw < HALF) & !wide;
                let fit = if t >= prev { 0 } else { w - keep };
                let mut retry = fit.saturating_sub(e);
                if !fits & !(usual & ((t >= prev) | (keep > 0))) {
                    if memo.0 != (prev, cur, cost) {
                        memo = ((prev, cur, cost), self.fit_point(prev, cur, cost));
                    }
                    retry = Self::until(memo.1, e);
                }
                // Zero when admitted, by a mask: the verdict flips at random on a trace
                // over the limit, so a branch on it would be mispredicted half the time.
                let retry = retry & u64::from(fits).wrapping_sub(1);
                cur += taken;
                wrote |= taken != 0;
                (fits, remaining, retry)
            } else {
                if valid {
                    s = p.pack(idx, cur, prev);
                }
                let (v, base, fits, remaining, new) = self.lean(s, now, cost);
                let retry = if fits {
                    0
                } else {
                    base.saturating_add(self.time_until_fits(&v, cost))
                };
                wrote |= new != s;
                s = new;
                (idx, prev, cur) = (v.idx, p.c1(new), p.c0(new));
                if by_prev.divisor() != prev.max(1) {
                    by_prev = Divider::new(prev);
                }
                (start, valid) = match idx.checked_mul(w) {
                    Some(st) => (st, true),
                    None => (0, false),
                };
                (fits, remaining, retry)
            };
            write(
                i,
                Ok(BatchDecision {
                    allowed: fits,
                    remaining,
                    retry_after: Nanos(retry),
                    delay: Nanos::ZERO,
                }),
            );
        }
        if valid {
            s = p.pack(idx, cur, prev);
        }
        (s, wrote)
    }
}

// ---------------------------------------------------------------------------------------
// Shared forms

/// A window limiter shared between threads: the generic [`Shared`] over a
/// [`FixedWindowConfig`] or [`SlidingWindowConfig`] word.
pub type SharedWindow<A> = Shared<A>;

/// A lock-free fixed window.
pub type SharedFixedWindow = Shared<FixedWindowConfig>;
/// A lock-free sliding-window counter.
pub type SharedSlidingWindow = Shared<SlidingWindowConfig>;

/// A word with zero counts (fresh at every instant) other than `avoid`; never `u64::MAX`
/// (its counts are not zero).
const fn empty_word_besides(p: Packing, avoid: u64) -> u64 {
    if avoid == 0 {
        1 << (p.cb * p.counts)
    } else {
        0
    }
}

/// The sentinel `u64::MAX` moved one window ahead (same counts): the stored window then
/// reads as a rewind, which keeps counting it — conservative.
const fn next_window(p: Packing, word: u64) -> u64 {
    word.wrapping_add(1 << (p.cb * p.counts))
}

/// The [`Algorithm`] and [`WordStep`] impls of a window: its state is the packed word and
/// its time base is ns, so both forms share one step; a window kind only says how it
/// tells an empty state (`fresh`) and how it charges without a limit check (`charge`).
macro_rules! window_algorithm {
    (
        $cfg:ident, $single:ident, $what:literal,
        fresh($fs:ident, $fword:ident, $fnow:ident) $fresh:block,
        charge($cs:ident, $cword:ident, $cnow:ident, $ccost:ident) $charge:block
    ) => {
        #[doc = concat!("A single-owner ", $what, "; see the [module docs](self).")]
        pub type $single = Limiter<$cfg>;

        impl Limiter<$cfg> {
            #[doc = concat!("An empty ", $what, ": `limit` per `window`.")]
            pub const fn new(limit: u64, window: Nanos) -> Result<Self, ParamError> {
                match $cfg::new(limit, window) {
                    Ok(algorithm) => Ok(Limiter {
                        algorithm,
                        state: WindowState(0),
                    }),
                    Err(e) => Err(e),
                }
            }
        }

        impl Shared<$cfg> {
            #[doc = concat!("An empty shared ", $what, ".")]
            pub fn new(limit: u64, window: Nanos) -> Result<Self, ParamError> {
                Ok(Shared::from_config($cfg::new(limit, window)?))
            }
        }

        impl Algorithm for $cfg {
            type State = WindowState;
            fn fresh_state(&self) -> WindowState {
                WindowState(0)
            }
            fn acquire_state(
                &self,
                state: &mut WindowState,
                now: Nanos,
                cost: u64,
            ) -> Result<Decision, InsufficientCapacity> {
                acquire_word(self, &mut state.0, now, cost)
            }
            fn peek_state(
                &self,
                state: &WindowState,
                now: Nanos,
                cost: u64,
            ) -> Result<Decision, InsufficientCapacity> {
                peek_word(self, state.0, now, cost)
            }
            fn is_fresh_state(&self, state: &WindowState, now: Nanos) -> bool {
                let ($fs, $fword, $fnow) = (self, state.0, now);
                $fresh
            }
            fn capacity(&self) -> u64 {
                self.limit
            }
        }

        impl WordStep for $cfg {
            #[inline(always)]
            fn now_word(&self, now: Nanos) -> u64 {
                now.0
            }
            #[inline(always)]
            fn check_cost(&self, cost: u64) -> Result<(), InsufficientCapacity> {
                capacity_check(self.limit, cost)
            }
            #[inline]
            fn step_word(&self, word: u64, now_w: u64, cost: u64) -> (Decision, Option<u64>) {
                self.step(word, Nanos(now_w), cost)
            }
            fn is_fresh_word(&self, word: u64, now_w: u64) -> bool {
                self.is_fresh_state(&WindowState(word), Nanos(now_w))
            }
            fn fresh_word(&self, _now_w: u64, avoid: u64) -> u64 {
                empty_word_besides(self.p, avoid)
            }
            fn charge_word(&self, word: u64, now_w: u64, cost: u64) -> u64 {
                let ($cs, $cword, $cnow, $ccost) = (self, word, Nanos(now_w), cost);
                $charge
            }
            fn off_sentinel(&self, word: u64) -> u64 {
                next_window(self.p, word)
            }
        }
    };
}

window_algorithm!(
    FixedWindowConfig, FixedWindow, "fixed window",
    fresh(c, word, now) { c.step(word, now, 0).0.remaining == c.limit },
    charge(c, word, now, cost) {
        let (idx, count) = c.counting(word, now);
        c.p.pack(idx, count.saturating_add(cost).min(c.limit), 0)
    }
);

window_algorithm!(
    SlidingWindowConfig, SlidingWindow, "sliding-window counter",
    fresh(c, word, now) {
        let v = c.view(word, now);
        v.prev == 0 && v.cur == 0
    },
    charge(c, word, now, cost) {
        let v = c.view(word, now);
        c.p.pack(v.idx, v.cur.saturating_add(cost).min(c.limit), v.prev)
    }
);

impl LocalRun for FixedWindowConfig {
    /// Events `a..b` on the local word `s`, with the word kept decoded between events: the
    /// full index of its window, that window's start and its count. An event inside that
    /// window (the usual case on a sorted trace) is then [`FixedWindowConfig::batch_step`]
    /// without the division by `W`, the unpacking, the window relation and the packing —
    /// the same integers, since the step on the packed word sees the same window
    /// (`Rel::Same`, or a zero count) and writes back `pack(idx, count + taken, 0)`, which
    /// changes the word iff `taken > 0`; the time to the window's end is `W − e`. Any other
    /// event (the first of the batch, a new window, a rewind) runs the step itself on the
    /// packed word and decodes the result.
    #[inline(always)]
    fn run_local<E: Events, W: Outcomes>(
        &self,
        mut s: u64,
        a: usize,
        b: usize,
        event: &mut E,
        write: &mut W,
    ) -> (u64, bool) {
        let (limit, w, p) = (self.limit, self.window.divisor(), self.p);
        let mut wrote = false;
        // The decoded word; `valid` once an event decoded it and its window start fits.
        let (mut idx, mut start, mut cur, mut valid) = (0u64, 0u64, 0u64, false);
        for i in a..b {
            let (now, cost) = event(i);
            if let Err(e) = capacity_check(limit, cost) {
                write(i, Err(e));
                continue;
            }
            let e = now.0.wrapping_sub(start);
            let d = if valid & (now.0 >= start) & (e < w) {
                let fits = cur + cost <= limit;
                let taken = if fits { cost } else { 0 };
                cur += taken;
                wrote |= taken != 0;
                // Zero when admitted, by a mask: the verdict flips at random on a trace
                // over the limit, so a branch on it would be mispredicted half the time.
                let retry = (w - e) & u64::from(fits).wrapping_sub(1);
                BatchDecision {
                    allowed: fits,
                    remaining: limit - cur,
                    retry_after: Nanos(retry),
                    delay: Nanos::ZERO,
                }
            } else {
                if valid {
                    s = p.pack(idx, cur, 0);
                }
                let (d, new, new_idx) = self.batch_step(s, now, cost);
                wrote |= new != s;
                s = new;
                (idx, cur) = (new_idx, limit - d.remaining);
                (start, valid) = match idx.checked_mul(w) {
                    Some(st) => (st, true),
                    None => (0, false),
                };
                d
            };
            write(i, Ok(d));
        }
        if valid {
            s = p.pack(idx, cur, 0);
        }
        (s, wrote)
    }
}

impl LocalRun for SlidingWindowConfig {
    /// The counter's step on a decoded word: see [`SlidingWindowConfig::run_decoded`].
    #[inline(always)]
    fn run_local<E: Events, W: Outcomes>(
        &self,
        s: u64,
        a: usize,
        b: usize,
        event: &mut E,
        write: &mut W,
    ) -> (u64, bool) {
        self.run_decoded(s, a, b, event, write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: u64 = 1_000_000_000;

    /// Found by fuzzing: a cost-0 acquisition in a later window must move the stored index,
    /// or a call one horizon after the last admission reads as a rewind.
    #[test]
    fn cost_zero_acquisitions_keep_the_index_within_the_horizon() {
        // Cost 12 at 0, then cost 0 at t1 and t2: both forms agree, and each later call
        // sees a fresh window (all 14 remaining, nothing to reset).
        fn zero_costs_see_fresh_windows<C: Algorithm>(
            mut single: Limiter<C>,
            shared: Shared<C>,
            (t1, t2): (u64, u64),
            what: &str,
        ) where
            Shared<C>: crate::SharedRateLimiter,
        {
            for (t, cost) in [(0, 12), (t1, 0), (t2, 0)] {
                let d = single.acquire(Nanos(t), cost).unwrap();
                assert_eq!(
                    d,
                    crate::SharedRateLimiter::acquire(&shared, Nanos(t), cost).unwrap()
                );
                if t != 0 {
                    assert_eq!(
                        (d.remaining, d.reset_after),
                        (14, Nanos::ZERO),
                        "{what} at {t}"
                    );
                }
            }
        }
        // fixed, limit 14: horizon 2^59 windows; t1 and t2 − t1 are inside it, t2 is not
        let fixed = (4_268_070_197_446_523_707, 1 << 63);
        zero_costs_see_fresh_windows(
            FixedWindow::new(14, Nanos(15)).unwrap(),
            SharedFixedWindow::new(14, Nanos(15)).unwrap(),
            fixed,
            "fixed",
        );
        // counter, limit 14: horizon 2^55 windows; the same shape scaled to it
        let counter = ((3 << 53) * 15, (3 << 54) * 15);
        let sw = SlidingWindow::new(14, Nanos(15)).unwrap();
        assert_eq!(sw.algorithm().horizon(), 1 << 55);
        zero_costs_see_fresh_windows(
            sw,
            SharedSlidingWindow::new(14, Nanos(15)).unwrap(),
            counter,
            "counter",
        );
    }

    #[test]
    fn fixed_window_basics() {
        let mut fw = FixedWindow::new(3, Nanos(S)).unwrap();
        let sh = SharedFixedWindow::new(3, Nanos(S)).unwrap();
        for t in [0, 1, 2] {
            assert_eq!(fw.acquire(Nanos(t), 1), sh.acquire(Nanos(t), 1));
        }
        let d = fw.acquire(Nanos(10), 1).unwrap();
        assert_eq!(d.verdict, Verdict::Reject);
        assert_eq!(d.retry_after, Nanos(S - 10));
        assert!(fw.acquire(Nanos(S), 3).unwrap().is_allowed());
        // Rewind into the previous window: no time passed, still the newer window's count.
        assert!(!fw.acquire(Nanos(5), 1).unwrap().is_allowed());
        assert!(fw.acquire(Nanos(5), 4).is_err());
        assert!(fw.is_fresh(Nanos(2 * S)));
        assert!(!fw.is_fresh(Nanos(2 * S - 1)));
        assert!(FixedWindow::new(0, Nanos(1)).is_err());
        assert!(FixedWindow::new(1 << 40, Nanos(1)).is_err());
    }

    #[test]
    fn sliding_counter_weights() {
        let mut sw = SlidingWindow::new(10, Nanos(S)).unwrap();
        assert!(sw.acquire(Nanos(0), 10).unwrap().is_allowed());
        let d = sw.acquire(Nanos(S / 2), 1).unwrap();
        assert_eq!(d.verdict, Verdict::Reject);
        // Next window: 10 · (1 − e) + 0 ≤ 9 ⇔ e ≥ 0.1 s → retry at 1.1 s.
        assert_eq!(d.retry_after, Nanos(S + S / 10 - S / 2));
        assert_eq!(
            sw.peek(Nanos(S + S / 10), 1).unwrap().verdict,
            Verdict::Admit
        );
        assert_eq!(
            sw.peek(Nanos(S + S / 10 - 1), 1).unwrap().verdict,
            Verdict::Reject
        );
        assert!(sw.is_fresh(Nanos(2 * S)));
        let cfg = SlidingWindowConfig::new(10, Nanos(S)).unwrap();
        crate::shared::assert_equals_single(cfg, 3000, S / 3, 5);
    }

    #[test]
    fn extremes() {
        let mut fw = FixedWindow::new(MAX_FIXED_LIMIT, Nanos(1)).unwrap();
        let mut sw = SlidingWindow::new(MAX_SLIDING_LIMIT, Nanos(u64::MAX)).unwrap();
        for now in [0, u64::MAX, 3, u64::MAX / 2, 0] {
            for cost in [0, 1, MAX_SLIDING_LIMIT] {
                let _ = fw.acquire(Nanos(now), cost);
                let _ = sw.acquire(Nanos(now), cost);
            }
        }
    }
}
