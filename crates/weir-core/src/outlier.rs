//! Passive outlier ejection over an upstream's endpoints, and the choice of an endpoint.
//!
//! **Why.** A dead or failing endpoint in round robin keeps taking its share of attempts
//! (and of retries), and a per-route breaker opens for the whole route even when the other
//! endpoints are healthy. Ejection takes the one bad endpoint out of rotation for a while,
//! and two limits keep it from doing harm: at most `max_ejection_percent` of the endpoints
//! are ejected at once, and below `panic_threshold` healthy endpoints every endpoint gets
//! traffic again. Both hold *by construction* (a reservation on one pool counter), so the
//! cases other proxies get wrong — more than the maximum ejected under concurrent failures,
//! the lone host of an upstream ejected, every endpoint ejected and traffic going nowhere —
//! cannot happen here.
//!
//! **Rules** ([`OutlierConfig`]; the reference model in `tests/outlier.rs` is these rules
//! written plainly, and the property tests compare every decision against it):
//! - *Counting.* A non-5xx response resets both streaks; a 5xx increments the 5xx streak and
//!   resets the gateway-failure streak; a gateway failure (connect failure, reset, protocol
//!   error, timeout) increments the gateway-failure streak and leaves the 5xx streak alone.
//!   Every attempt also counts in the endpoint's *interval* (a tumbling window of
//!   `interval`, aligned on multiples of it): attempts, and failures of both kinds.
//! - *Ejection*, checked at each attempt that failed: the 5xx streak reaching
//!   `consecutive_5xx`, the gateway streak reaching `consecutive_failures`, or (with at
//!   least `min_requests` attempts in the current interval) failures ≥
//!   `failure_percentage` of them (parts per million, compared exactly). The streaks are
//!   checked in that order and the first rule met names the reason.
//! - *Maximum.* An ejection happens only if fewer than [`max_ejectable`] endpoints are
//!   ejected: `⌊n × max_ejection_percent / 100⌋` but at least 1 when `n ≥ 2` and the
//!   percentage is not 0; never the only endpoint of an upstream. A refused ejection
//!   leaves the streak growing, so the next failure tries again.
//! - *Duration.* The k-th ejection of an endpoint lasts `min(k × base, max)`, moved by a
//!   uniform draw in `±jitter` of it (`span = ⌊d × jitter_ppm / 10^6⌋`, offset
//!   `draw mod (2·span + 1) − span`), then capped at `max` again. `k` starts again at 1
//!   when the endpoint stayed in rotation for `max_ejection` since its last ejection ended.
//! - *Return.* At the end of its ejection an endpoint is back in rotation with fresh
//!   streaks and interval; outcomes of attempts reported while it is ejected are ignored.
//! - *Panic.* While `healthy × 100 < panic_threshold × n` (or nothing is healthy) every
//!   endpoint is eligible, ejected or not.
//! - *Choice.* [`Choice::RoundRobin`] takes the first eligible endpoint from the cursor on;
//!   [`Choice::TwoRandom`] draws two distinct eligible endpoints and takes the one with
//!   fewer attempts in flight (the first on a tie). An endpoint to `avoid` (the one a retry
//!   failed on) is not eligible while another one is.
//!
//! **Shared form.** State lives in caller-owned memory: one [`SharedOutlier`] per upstream
//! (the ejected count) and one [`EndpointState`] per endpoint, shared by every worker.
//! An endpoint's streaks, ejection count, flags and an epoch are one `AtomicU64` changed by
//! CAS. An ejection first reserves a slot on the pool counter (a CAS from `c < max` to
//! `c + 1`), then CASes the endpoint word into *transit* (streaks cleared, epoch bumped),
//! stores the end instant and the cleared interval, and publishes the word as *ejected*
//! with a release store. Nobody else changes a word in transit, and a reader that sees
//! *ejected* (acquire) sees its end instant. The return is a CAS from that exact word
//! (the epoch rules out ABA) followed by releasing the slot, so the pool count is never
//! below the number of endpoints out of rotation, and the maximum holds under any
//! interleaving (the loom model checks it). Returns happen in [`SharedOutlier::refresh`],
//! which [`SharedOutlier::record`] and [`SharedOutlier::pick`] call first: with nothing
//! ejected it is one load. The interval word is updated by its own CAS; an attempt counted
//! while its endpoint is being ejected may land in the cleared interval (at most one per
//! racing call — documented approximation).
//!
//! **Cost.** With nothing ejected a pick is two loads (and the in-flight loads of
//! [`Choice::TwoRandom`]); otherwise it scans the endpoints (`O(n)` loads; upstreams have
//! a handful). A record is a CAS on the interval word (only with a failure-share rule)
//! and, on a streak change, one on the endpoint word; a success on a clean streak is
//! loads only.

use crate::error::ParamError;
use crate::sync::{AtomicU64, Ordering};
use crate::time::Nanos;

/// Largest `consecutive_failures` / `consecutive_5xx` (the streaks are 16 bits).
pub const CONSECUTIVE_MAX: u32 = 0xFFFF;
/// Largest `min_requests` (the interval counts are 20 bits).
pub const MIN_REQUESTS_MAX: u32 = COUNT_MASK as u32;

const STREAK_MASK: u64 = 0xFFFF;
const C5_SHIFT: u32 = 16;
const K_SHIFT: u32 = 32;
const K_MAX: u64 = 0xFF;
const EJECTED: u64 = 1 << 40;
const TRANSIT: u64 = 1 << 41;
const EPOCH_SHIFT: u32 = 42;
const OUT: u64 = EJECTED | TRANSIT;

const IDX_MASK: u64 = 0xFF_FFFF;
const COUNT_MASK: u64 = 0xF_FFFF;
const ATT_SHIFT: u32 = 24;
const FAIL_SHIFT: u32 = 44;

/// The ejection parameters of one upstream (`[upstreams.outlier]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutlierConfig {
    /// Gateway failures in a row that eject (`None`: not used).
    pub consecutive_failures: Option<u32>,
    /// 5xx responses in a row that eject (`None`: not used).
    pub consecutive_5xx: Option<u32>,
    /// Failed share of an interval's attempts that ejects, in parts per million.
    pub failure_ppm: Option<u32>,
    /// Attempts an interval needs before its failure share counts.
    pub min_requests: u32,
    /// Length of the tumbling interval of the failure share.
    pub interval: Nanos,
    /// First ejection's length.
    pub base_ejection: Nanos,
    /// Longest ejection; also the time in rotation that resets the ejection count.
    pub max_ejection: Nanos,
    /// Relative jitter of an ejection, parts per million (0 to 10^6).
    pub jitter_ppm: u32,
    /// Most endpoints ejected at once, percent of the upstream's (0 to 100).
    pub max_ejection_percent: u32,
    /// Healthy share (percent) below which every endpoint is used (0 to 100).
    pub panic_threshold: u32,
}

impl Default for OutlierConfig {
    /// The documented defaults of `[upstreams.outlier]`.
    fn default() -> Self {
        OutlierConfig {
            consecutive_failures: Some(5),
            consecutive_5xx: None,
            failure_ppm: None,
            min_requests: 20,
            interval: Nanos::from_secs(10),
            base_ejection: Nanos::from_secs(30),
            max_ejection: Nanos::from_secs(300),
            jitter_ppm: 0,
            max_ejection_percent: 10,
            panic_threshold: 50,
        }
    }
}

impl OutlierConfig {
    /// Checks every range; the error names the field.
    pub fn validate(&self) -> Result<(), ParamError> {
        for (name, v) in [
            ("consecutive_failures", self.consecutive_failures),
            ("consecutive_5xx", self.consecutive_5xx),
        ] {
            match v {
                Some(0) => return Err(ParamError::Zero(name)),
                Some(v) if v > CONSECUTIVE_MAX => return Err(ParamError::OutOfRange(name)),
                _ => {}
            }
        }
        if self.failure_ppm.is_some_and(|p| p > 1_000_000) {
            return Err(ParamError::OutOfRange("failure_percentage"));
        }
        if self.min_requests == 0 {
            return Err(ParamError::Zero("min_requests"));
        }
        if self.min_requests > MIN_REQUESTS_MAX {
            return Err(ParamError::OutOfRange("min_requests"));
        }
        for (name, d) in [
            ("interval", self.interval),
            ("base_ejection", self.base_ejection),
            ("max_ejection", self.max_ejection),
        ] {
            if d.is_zero() {
                return Err(ParamError::Zero(name));
            }
        }
        if self.base_ejection > self.max_ejection {
            return Err(ParamError::Order {
                low: "base_ejection",
                high: "max_ejection",
            });
        }
        if self.jitter_ppm > 1_000_000 {
            return Err(ParamError::OutOfRange("jitter"));
        }
        if self.max_ejection_percent > 100 {
            return Err(ParamError::OutOfRange("max_ejection_percent"));
        }
        if self.panic_threshold > 100 {
            return Err(ParamError::OutOfRange("panic_threshold"));
        }
        Ok(())
    }
}

/// What an attempt on an endpoint produced, as ejection counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptKind {
    /// A response with a non-5xx status.
    Success,
    /// A 5xx response.
    Http5xx,
    /// Connect failure, reset, protocol error or timeout.
    GatewayFailure,
}

/// Why an endpoint was ejected (the `reason` label of `weir_ejections_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EjectReason {
    /// The gateway-failure streak reached `consecutive_failures`.
    ConsecutiveFailures,
    /// The 5xx streak reached `consecutive_5xx`.
    Consecutive5xx,
    /// The interval's failed share reached `failure_percentage`.
    FailurePercentage,
}

impl EjectReason {
    /// The metric label.
    pub const fn as_str(self) -> &'static str {
        match self {
            EjectReason::ConsecutiveFailures => "consecutive_failures",
            EjectReason::Consecutive5xx => "consecutive_5xx",
            EjectReason::FailurePercentage => "failure_percentage",
        }
    }
}

/// An ejection performed by [`SharedOutlier::record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ejection {
    /// Why.
    pub reason: EjectReason,
    /// The ejection's number since the count was last reset (1 = first).
    pub nth: u32,
    /// When it ends.
    pub until: Nanos,
}

/// How [`SharedOutlier::pick`] chooses among the eligible endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The first eligible endpoint at or after this position (modulo the count).
    RoundRobin(usize),
    /// Two distinct eligible endpoints drawn from this value; fewer in flight wins.
    TwoRandom(u64),
}

/// What [`SharedOutlier::pick`] chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    /// Index of the endpoint.
    pub index: usize,
    /// The upstream was in panic (ejected endpoints were eligible).
    pub panic: bool,
}

/// One endpoint's shared state.
#[derive(Debug, Default)]
pub struct EndpointState {
    word: AtomicU64,
    window: AtomicU64,
    until: AtomicU64,
    ejections: AtomicU64,
    inflight: AtomicU64,
}

impl EndpointState {
    /// A healthy endpoint with no history.
    pub fn new() -> Self {
        EndpointState {
            word: AtomicU64::new(0),
            window: AtomicU64::new(0),
            until: AtomicU64::new(0),
            ejections: AtomicU64::new(0),
            inflight: AtomicU64::new(0),
        }
    }

    /// Ejections over its lifetime.
    pub fn ejections(&self) -> u64 {
        self.ejections.load(Ordering::Relaxed)
    }

    /// Attempts in flight (raised by [`EndpointState::start`]).
    pub fn inflight(&self) -> u64 {
        self.inflight.load(Ordering::Relaxed)
    }

    /// An attempt on this endpoint starts (for [`Choice::TwoRandom`]).
    pub fn start(&self) {
        self.inflight.fetch_add(1, Ordering::Relaxed);
    }

    /// An attempt begun with [`EndpointState::start`] is over.
    pub fn end(&self) {
        let _ = self
            .inflight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Time left in the current ejection at `now` (zero when in rotation).
    pub fn ejected_for(&self, now: Nanos) -> Nanos {
        let w = self.word.load(Ordering::Acquire);
        if w & OUT == 0 {
            return Nanos::ZERO;
        }
        Nanos(self.until.load(Ordering::Acquire)).saturating_sub(now)
    }

    /// In rotation at `now` (not ejected, or its ejection is over).
    pub fn healthy(&self, now: Nanos) -> bool {
        let w = self.word.load(Ordering::Acquire);
        w & TRANSIT == 0 && (w & EJECTED == 0 || self.until.load(Ordering::Acquire) <= now.0)
    }
}

/// Most endpoints of `n` that may be ejected at once.
pub const fn max_ejectable(n: usize, percent: u32) -> usize {
    if n < 2 || percent == 0 {
        return 0;
    }
    let m = n.saturating_mul(percent as usize) / 100;
    if m == 0 { 1 } else { m }
}

/// The length of the `nth` ejection with `draw` as its random value (see the module docs).
pub fn ejection_time(cfg: &OutlierConfig, nth: u32, draw: u64) -> Nanos {
    let d = cfg
        .base_ejection
        .saturating_mul(u64::from(nth))
        .min(cfg.max_ejection);
    if cfg.jitter_ppm == 0 {
        return d;
    }
    let span = (u128::from(d.0) * u128::from(cfg.jitter_ppm) / 1_000_000) as u64;
    let off = draw % span.saturating_mul(2).saturating_add(1);
    Nanos(d.0 - span)
        .saturating_add(Nanos(off))
        .min(cfg.max_ejection)
}

fn interval_index(cfg: &OutlierConfig, now: Nanos) -> u64 {
    (now.0 / cfg.interval.0.max(1)) & IDX_MASK
}

/// The streak word after an attempt of `kind`, and the streak rule it meets.
fn streak_step(cfg: &OutlierConfig, w: u64, kind: AttemptKind) -> (u64, Option<EjectReason>) {
    let cf = w & STREAK_MASK;
    let c5 = (w >> C5_SHIFT) & STREAK_MASK;
    let (cf, c5) = match kind {
        AttemptKind::Success => (0, 0),
        AttemptKind::Http5xx => (0, (c5 + 1).min(STREAK_MASK)),
        AttemptKind::GatewayFailure => ((cf + 1).min(STREAK_MASK), c5),
    };
    let reason = if cfg
        .consecutive_5xx
        .is_some_and(|t| kind == AttemptKind::Http5xx && c5 >= u64::from(t))
    {
        Some(EjectReason::Consecutive5xx)
    } else if cfg
        .consecutive_failures
        .is_some_and(|t| kind == AttemptKind::GatewayFailure && cf >= u64::from(t))
    {
        Some(EjectReason::ConsecutiveFailures)
    } else {
        None
    };
    let keep = w & !(STREAK_MASK | (STREAK_MASK << C5_SHIFT));
    (keep | cf | (c5 << C5_SHIFT), reason)
}

/// The interval word after an attempt, and whether the failure share is met.
fn window_step(cfg: &OutlierConfig, w: u64, idx: u64, failed: bool) -> (u64, bool) {
    let (mut att, mut fail) = if w & IDX_MASK == idx {
        (
            (w >> ATT_SHIFT) & COUNT_MASK,
            (w >> FAIL_SHIFT) & COUNT_MASK,
        )
    } else {
        (0, 0)
    };
    att = (att + 1).min(COUNT_MASK);
    if failed {
        fail = (fail + 1).min(COUNT_MASK);
    }
    let met = failed
        && att >= u64::from(cfg.min_requests)
        && cfg
            .failure_ppm
            .is_some_and(|p| u128::from(fail) * 1_000_000 >= u128::from(p) * u128::from(att));
    (idx | (att << ATT_SHIFT) | (fail << FAIL_SHIFT), met)
}

/// The ejection state of one upstream: the count of endpoints out of rotation. The
/// endpoints' own state is a slice of [`EndpointState`] passed to every call, so the
/// caller owns the memory and a reload can keep both.
#[derive(Debug, Default)]
pub struct SharedOutlier {
    ejected: AtomicU64,
}

impl SharedOutlier {
    /// Nothing ejected.
    pub fn new() -> Self {
        SharedOutlier {
            ejected: AtomicU64::new(0),
        }
    }

    /// Endpoints out of rotation (or being taken out): never fewer than there are.
    pub fn ejected(&self) -> usize {
        self.ejected.load(Ordering::Acquire) as usize
    }

    /// Brings back every endpoint whose ejection ended by `now`.
    pub fn refresh(&self, eps: &[EndpointState], now: Nanos) {
        if self.ejected.load(Ordering::Acquire) == 0 {
            return;
        }
        for ep in eps {
            let w = ep.word.load(Ordering::Acquire);
            if w & OUT != EJECTED || ep.until.load(Ordering::Acquire) > now.0 {
                continue;
            }
            // Fresh streaks, same ejection count, next epoch.
            let back = (w & (K_MAX << K_SHIFT)) | next_epoch(w);
            if ep
                .word
                .compare_exchange(w, back, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.release();
            }
        }
    }

    fn release(&self) {
        let _ = self
            .ejected
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1));
    }

    /// Whether the upstream is in panic at `n` endpoints (call [`Self::refresh`] first).
    pub fn in_panic(&self, cfg: &OutlierConfig, n: usize) -> bool {
        let healthy = n.saturating_sub(self.ejected()) as u64;
        healthy == 0 || healthy * 100 < u64::from(cfg.panic_threshold) * n as u64
    }

    /// Records the outcome of an attempt on `eps[i]` at `now`; `draw` is a uniform random
    /// value for the jitter. Returns the ejection it caused, if any.
    pub fn record(
        &self,
        cfg: &OutlierConfig,
        eps: &[EndpointState],
        i: usize,
        kind: AttemptKind,
        now: Nanos,
        draw: u64,
    ) -> Option<Ejection> {
        self.refresh(eps, now);
        let ep = eps.get(i)?;
        if ep.word.load(Ordering::Acquire) & OUT != 0 {
            return None;
        }
        let failed = kind != AttemptKind::Success;
        let idx = interval_index(cfg, now);
        let mut share = false;
        // Without a failure-share rule the interval counts are never read: not kept.
        if cfg.failure_ppm.is_some() {
            let _ = ep
                .window
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                    let (n, met) = window_step(cfg, w, idx, failed);
                    share = met;
                    Some(n)
                });
        }
        let mut w = ep.word.load(Ordering::Acquire);
        loop {
            if w & OUT != 0 {
                return None;
            }
            let (next, streak) = streak_step(cfg, w, kind);
            let reason = streak.or(share.then_some(EjectReason::FailurePercentage));
            if let Some(reason) = reason
                && self.reserve(max_ejectable(eps.len(), cfg.max_ejection_percent))
            {
                match self.eject(cfg, ep, w, reason, now, draw) {
                    Ok(e) => return Some(e),
                    Err(cur) => {
                        self.release();
                        w = cur;
                        continue;
                    }
                }
            }
            if next == w {
                return None;
            }
            match ep
                .word
                .compare_exchange_weak(w, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return None,
                Err(cur) => w = cur,
            }
        }
    }

    fn reserve(&self, max: usize) -> bool {
        self.ejected
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                ((c as usize) < max).then_some(c + 1)
            })
            .is_ok()
    }

    /// Takes `ep` (word `w`) out of rotation with a reserved slot; `Err(current word)` when
    /// the word changed under us.
    fn eject(
        &self,
        cfg: &OutlierConfig,
        ep: &EndpointState,
        w: u64,
        reason: EjectReason,
        now: Nanos,
        draw: u64,
    ) -> Result<Ejection, u64> {
        let k = (w >> K_SHIFT) & K_MAX;
        let last_end = Nanos(ep.until.load(Ordering::Acquire));
        let k = if k == 0 || now.saturating_sub(last_end) >= cfg.max_ejection {
            1
        } else {
            (k + 1).min(K_MAX)
        };
        let transit = (k << K_SHIFT) | TRANSIT | next_epoch(w);
        ep.word
            .compare_exchange(w, transit, Ordering::AcqRel, Ordering::Acquire)?;
        let until = now.saturating_add(ejection_time(cfg, k as u32, draw));
        ep.until.store(until.0, Ordering::Release);
        ep.window.store(0, Ordering::Release);
        ep.ejections.fetch_add(1, Ordering::Relaxed);
        ep.word
            .store((transit & !TRANSIT) | EJECTED, Ordering::Release);
        Ok(Ejection {
            reason,
            nth: k as u32,
            until,
        })
    }

    /// Chooses an endpoint for an attempt at `now` (see the module docs); `avoid` is the
    /// endpoint the previous attempt failed on. `None` only for an empty slice.
    pub fn pick(
        &self,
        cfg: &OutlierConfig,
        eps: &[EndpointState],
        now: Nanos,
        choice: Choice,
        avoid: Option<usize>,
    ) -> Option<Pick> {
        let n = eps.len();
        if n == 0 {
            return None;
        }
        self.refresh(eps, now);
        let panic = self.in_panic(cfg, n);
        if self.ejected() == 0 {
            // Nothing out of rotation (the count is never below the endpoints out): the
            // same choice without scanning the endpoints.
            return Some(Pick {
                index: pick_all(eps, choice, avoid),
                panic,
            });
        }
        let usable = |i: usize| panic || eps[i].healthy(now);
        let strict = |i: usize| usable(i) && Some(i) != avoid;
        let count = |f: &dyn Fn(usize) -> bool| (0..n).filter(|&i| f(i)).count();
        let (m, ok): (usize, &dyn Fn(usize) -> bool) = match count(&strict) {
            0 => (count(&usable), &usable),
            m => (m, &strict),
        };
        let all = |_: usize| true;
        let (m, ok): (usize, &dyn Fn(usize) -> bool) = if m == 0 { (n, &all) } else { (m, ok) };
        let index = match choice {
            Choice::RoundRobin(c) => (0..n).map(|k| (c % n + k) % n).find(|&i| ok(i)),
            Choice::TwoRandom(r) => {
                let nth = |j: usize| (0..n).filter(|&i| ok(i)).nth(j);
                let a = (r % m as u64) as usize;
                if m == 1 {
                    nth(a)
                } else {
                    let b = ((r >> 32) % (m as u64 - 1)) as usize;
                    let b = if b >= a { b + 1 } else { b };
                    match (nth(a), nth(b)) {
                        (Some(x), Some(y)) if eps[y].inflight() < eps[x].inflight() => Some(y),
                        (x, _) => x,
                    }
                }
            }
        };
        Some(Pick {
            index: index.unwrap_or(0),
            panic,
        })
    }
}

/// [`SharedOutlier::pick`] when every endpoint is eligible but `avoid`: the `j`-th
/// eligible endpoint is `j`, or `j + 1` from `avoid` on.
fn pick_all(eps: &[EndpointState], choice: Choice, avoid: Option<usize>) -> usize {
    let n = eps.len();
    let avoid = avoid.filter(|&a| a < n && n > 1);
    let m = n - usize::from(avoid.is_some());
    let nth = |j: usize| match avoid {
        Some(a) if j >= a => j + 1,
        _ => j,
    };
    match choice {
        Choice::RoundRobin(c) => {
            let i = c % n;
            if Some(i) == avoid { (i + 1) % n } else { i }
        }
        Choice::TwoRandom(r) => {
            let a = (r % m as u64) as usize;
            if m == 1 {
                return nth(a);
            }
            let b = ((r >> 32) % (m as u64 - 1)) as usize;
            let b = if b >= a { b + 1 } else { b };
            let (x, y) = (nth(a), nth(b));
            if eps[y].inflight() < eps[x].inflight() {
                y
            } else {
                x
            }
        }
    }
}

fn next_epoch(w: u64) -> u64 {
    ((w >> EPOCH_SHIFT).wrapping_add(1) << EPOCH_SHIFT) & !((1u64 << EPOCH_SHIFT) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> OutlierConfig {
        OutlierConfig {
            consecutive_failures: Some(2),
            consecutive_5xx: Some(3),
            base_ejection: Nanos(100),
            max_ejection: Nanos(250),
            max_ejection_percent: 50,
            ..OutlierConfig::default()
        }
    }

    fn eps(n: usize) -> [EndpointState; 4] {
        assert!(n <= 4);
        [(); 4].map(|_| EndpointState::new())
    }

    #[test]
    fn streaks_follow_the_counting_rule() {
        let c = cfg();
        let (w, r) = streak_step(&c, 0, AttemptKind::Http5xx);
        let (w, _) = streak_step(&c, w, AttemptKind::GatewayFailure);
        let (w, r2) = streak_step(&c, w, AttemptKind::Http5xx);
        assert_eq!((r, r2), (None, None));
        // The gateway failure did not reset the 5xx streak; the 5xx reset the gateway one.
        assert_eq!((w & STREAK_MASK, (w >> C5_SHIFT) & STREAK_MASK), (0, 2));
        let (w, r) = streak_step(&c, w, AttemptKind::Http5xx);
        assert_eq!(r, Some(EjectReason::Consecutive5xx));
        assert_eq!(streak_step(&c, w, AttemptKind::Success).0, 0);
    }

    #[test]
    fn ejections_grow_cap_and_reset() {
        let c = cfg();
        let e = eps(2);
        let e = &e[..2];
        let o = SharedOutlier::new();
        let mut t = Nanos(0);
        let mut lengths = [0u64; 4];
        for len in &mut lengths {
            assert!(
                o.record(&c, e, 0, AttemptKind::GatewayFailure, t, 0)
                    .is_none()
            );
            let ej = o
                .record(&c, e, 0, AttemptKind::GatewayFailure, t, 0)
                .unwrap();
            assert_eq!(ej.reason, EjectReason::ConsecutiveFailures);
            *len = ej.until.0 - t.0;
            assert!(!e[0].healthy(t) && e[1].healthy(t));
            t = ej.until;
        }
        assert_eq!(lengths, [100, 200, 250, 250]);
        assert_eq!(e[0].ejections(), 4);
        // In rotation for max_ejection since the last ejection ended: the count restarts.
        let t = t.saturating_add(Nanos(250));
        o.record(&c, e, 0, AttemptKind::GatewayFailure, t, 0);
        let ej = o
            .record(&c, e, 0, AttemptKind::GatewayFailure, t, 0)
            .unwrap();
        assert_eq!((ej.nth, ej.until.0 - t.0), (1, 100));
    }

    #[test]
    fn a_lone_host_is_never_ejected_and_max_holds() {
        let c = cfg();
        let e = eps(1);
        let o = SharedOutlier::new();
        for _ in 0..10 {
            assert!(
                o.record(&c, &e[..1], 0, AttemptKind::GatewayFailure, Nanos(0), 0)
                    .is_none()
            );
        }
        // Two of three failing with 50 %: one ejected, the other refused.
        let e3 = &e[..3];
        for i in [0, 1] {
            for _ in 0..3 {
                o.record(&c, e3, i, AttemptKind::GatewayFailure, Nanos(0), 0);
            }
        }
        assert_eq!(o.ejected(), 1);
        assert_eq!((0..3).filter(|&i| e3[i].healthy(Nanos(0))).count(), 2);
        assert_eq!(max_ejectable(3, 50), 1);
        assert_eq!(max_ejectable(2, 10), 1);
        assert_eq!(max_ejectable(10, 25), 2);
        assert_eq!(max_ejectable(4, 0), 0);
    }

    #[test]
    fn panic_uses_every_endpoint_and_retries_avoid_the_failed_one() {
        let c = OutlierConfig {
            max_ejection_percent: 100,
            panic_threshold: 60,
            ..cfg()
        };
        let e = eps(2);
        let e = &e[..2];
        let o = SharedOutlier::new();
        let pick = |c: usize, avoid| {
            o.pick(&cfg(), e, Nanos(0), Choice::RoundRobin(c), avoid)
                .unwrap()
                .index
        };
        assert_eq!(pick(0, Some(0)), 1);
        assert_eq!(pick(1, Some(1)), 0);
        o.record(&c, e, 0, AttemptKind::GatewayFailure, Nanos(0), 0);
        o.record(&c, e, 0, AttemptKind::GatewayFailure, Nanos(0), 0);
        // 1 of 2 healthy is 50 % < 60 %: panic, both used.
        let p = o
            .pick(&c, e, Nanos(0), Choice::RoundRobin(0), None)
            .unwrap();
        assert_eq!(
            p,
            Pick {
                index: 0,
                panic: true
            }
        );
        // Without panic the ejected one is skipped, even when the retry avoids the other.
        let calm = OutlierConfig {
            panic_threshold: 0,
            ..c
        };
        let p = o.pick(&calm, e, Nanos(0), Choice::RoundRobin(0), Some(1));
        assert_eq!(p.unwrap().index, 1);
        assert_eq!(e[0].ejected_for(Nanos(40)), Nanos(60));
        // After its ejection it is back, fresh.
        let p = o.pick(&calm, e, Nanos(100), Choice::RoundRobin(0), None);
        assert_eq!(
            p.unwrap(),
            Pick {
                index: 0,
                panic: false
            }
        );
        assert_eq!(o.ejected(), 0);
    }

    #[test]
    fn two_random_prefers_fewer_in_flight() {
        let e = eps(2);
        let e = &e[..2];
        e[0].start();
        e[0].start();
        e[1].start();
        let o = SharedOutlier::new();
        for r in 0..16u64 {
            let r = r.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let p = o.pick(&cfg(), e, Nanos(0), Choice::TwoRandom(r), None);
            assert_eq!(p.unwrap().index, 1);
        }
        e[0].end();
        e[0].end();
        e[0].end();
        assert_eq!(e[0].inflight(), 0);
    }

    #[test]
    fn failure_share_over_the_interval() {
        let c = OutlierConfig {
            consecutive_failures: None,
            failure_ppm: Some(500_000),
            min_requests: 4,
            ..cfg()
        };
        let e = eps(2);
        let e = &e[..2];
        let o = SharedOutlier::new();
        let kinds = [
            AttemptKind::Success,
            AttemptKind::Http5xx,
            AttemptKind::Success,
        ];
        for k in kinds {
            assert!(o.record(&c, e, 0, k, Nanos(0), 0).is_none());
        }
        // A new interval starts from zero: the 4th attempt is only the 1st there.
        let later = c.interval;
        assert!(o.record(&c, e, 0, AttemptKind::Http5xx, later, 0).is_none());
        for k in kinds {
            o.record(&c, e, 0, k, later, 0);
        }
        let ej = o.record(&c, e, 0, AttemptKind::GatewayFailure, later, 0);
        assert_eq!(ej.unwrap().reason, EjectReason::FailurePercentage);
    }

    #[test]
    fn jitter_stays_in_bounds_and_config_checks_name_fields() {
        let c = OutlierConfig {
            jitter_ppm: 100_000,
            ..cfg()
        };
        for draw in [0, 1, 7, 20, u64::MAX] {
            let d = ejection_time(&c, 1, draw).0;
            assert!((90..=110).contains(&d), "{d}");
            assert!(ejection_time(&c, 9, draw).0 <= 250);
        }
        assert_eq!(OutlierConfig::default().validate(), Ok(()));
        let bad = [
            (
                OutlierConfig {
                    base_ejection: Nanos(300),
                    ..cfg()
                },
                ParamError::Order {
                    low: "base_ejection",
                    high: "max_ejection",
                },
            ),
            (
                OutlierConfig {
                    consecutive_5xx: Some(0),
                    ..cfg()
                },
                ParamError::Zero("consecutive_5xx"),
            ),
            (
                OutlierConfig {
                    panic_threshold: 101,
                    ..cfg()
                },
                ParamError::OutOfRange("panic_threshold"),
            ),
        ];
        for (c, e) in bad {
            assert_eq!(c.validate(), Err(e));
        }
    }
}
