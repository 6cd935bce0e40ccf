//! Small, obviously-correct reference models of every limiter, for differential tests and
//! fuzz targets (enabled by the `reference` feature; not part of the stable API).
//!
//! They favour plainness over speed: `u128` rationals in units of `1/rate` ns for the
//! buckets (not the implementation's reduced `1/k` scale), nginx's algorithm step by step
//! for the leaky bucket, the window formulas without packing, and an event list for the log.
//! They are meant for small parameters (products must fit `u128`).

use crate::decision::{Decision, InsufficientCapacity, Verdict};
use crate::time::Nanos;

fn sat(x: u128) -> Nanos {
    Nanos(u64::try_from(x).unwrap_or(u64::MAX))
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The ideal GCRA in exact rationals: times in units of `1/rate` ns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RationalGcra {
    /// Admissions per `per`.
    pub rate: u128,
    /// Period in ns.
    pub per: u128,
    /// Capacity.
    pub burst: u128,
    /// Theoretical arrival time, in units of `1/rate` ns.
    pub tat: u128,
}

impl RationalGcra {
    /// A full bucket.
    pub fn new(rate: u64, per: u64, burst: u64) -> Self {
        RationalGcra {
            rate: rate.into(),
            per: per.into(),
            burst: burst.into(),
            tat: 0,
        }
    }
    fn ahead(&self, now: u64) -> u128 {
        self.tat.saturating_sub(now as u128 * self.rate)
    }
    fn w(&self) -> u128 {
        self.burst * self.per
    }
    fn levels(&self, ahead: u128) -> (u64, Nanos) {
        let w = self.w();
        let rem = if ahead >= w {
            0
        } else {
            (w - ahead) / self.per
        };
        let reset = if ahead == 0 {
            Nanos::ZERO
        } else {
            // Smallest d with ahead − d·rate ≤ w − (rem+1)·per.
            sat((ahead + (rem + 1) * self.per - w).div_ceil(self.rate))
        };
        (rem as u64, reset)
    }
    /// The decision for `cost` at `now`, and whether to record it.
    pub fn peek(&self, now: u64, cost: u64) -> Result<Decision, InsufficientCapacity> {
        if cost as u128 > self.burst {
            return Err(InsufficientCapacity {
                cost,
                capacity: self.burst as u64,
            });
        }
        let ahead = self.ahead(now);
        let inc = cost as u128 * self.per;
        // Admitted: the levels after the increment; refused: the levels as they are.
        let (verdict, level, retry_after) = if ahead + inc <= self.w() {
            (Verdict::Admit, ahead + inc, Nanos::ZERO)
        } else {
            let wait = sat((ahead + inc - self.w()).div_ceil(self.rate));
            (Verdict::Reject, ahead, wait)
        };
        let (remaining, reset_after) = self.levels(level);
        Ok(Decision {
            verdict,
            remaining,
            retry_after,
            reset_after,
        })
    }
    /// Acquire.
    pub fn acquire(&mut self, now: u64, cost: u64) -> Result<Decision, InsufficientCapacity> {
        let d = self.peek(now, cost)?;
        if d.is_allowed() && cost > 0 {
            self.tat = now as u128 * self.rate + self.ahead(now) + cost as u128 * self.per;
        }
        Ok(d)
    }
    /// Refund up to `n` tokens.
    pub fn refund(&mut self, now: u64, n: u64) {
        let ahead = self.ahead(now);
        if ahead > 0 {
            self.tat = now as u128 * self.rate + ahead.saturating_sub(n as u128 * self.per);
        }
    }
    /// Reconfigure keeping the tokens in use, rounded up to the implementation's unit
    /// (`gcd(per', rate')` of these units), capped at an empty bucket.
    pub fn reconfigure(&mut self, now: u64, rate: u64, per: u64, burst: u64) {
        let ahead = self.ahead(now).min(self.w());
        let mut new = RationalGcra::new(rate, per, burst);
        let g = gcd(new.per, new.rate);
        let x = (ahead * new.per).div_ceil(self.per);
        let a = (x.div_ceil(g) * g).min(new.w());
        new.tat = now as u128 * new.rate + a;
        *self = new;
    }
}

/// nginx `limit_req`, step by step, with excess in units of `1/rate` ns (one request =
/// `per` units) instead of milli-requests. A rewind counts as no time passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NginxModel {
    /// Requests per `per`.
    pub rate: u128,
    /// Period in ns.
    pub per: u128,
    /// Excess requests accepted.
    pub burst: u128,
    /// Excess requests passed without delay.
    pub delay: u128,
    /// Pass every accepted request at once.
    pub nodelay: bool,
    /// Last pass instant, if any.
    pub last: Option<u64>,
    /// Excess after the last pass.
    pub excess: u128,
}

impl NginxModel {
    /// An idle bucket.
    pub fn new(rate: u64, per: u64, burst: u64, delay: u64, nodelay: bool) -> Self {
        NginxModel {
            rate: rate.into(),
            per: per.into(),
            burst: burst.into(),
            delay: delay.into(),
            nodelay,
            last: None,
            excess: 0,
        }
    }
    /// Excess `cost` requests at `now` would leave (before the burst check): the first
    /// one `max(0, excess − leak + 1)`, each further one `+ 1`.
    fn next_excess(&self, now: u64, cost: u64) -> u128 {
        let e1 = match self.last {
            None => 0,
            Some(last) => {
                let leak = now.saturating_sub(last) as u128 * self.rate;
                (self.excess + self.per).saturating_sub(leak)
            }
        };
        e1 + (cost as u128 - 1) * self.per
    }
    /// The verdict for `cost ≥ 1` requests at `now` (state unchanged).
    pub fn verdict(&self, now: u64, cost: u64) -> Verdict {
        let e = self.next_excess(now, cost);
        if e > self.burst * self.per {
            Verdict::Reject
        } else if self.nodelay || e <= self.delay * self.per {
            Verdict::Admit
        } else {
            Verdict::Delay(sat((e - self.delay * self.per).div_ceil(self.rate)))
        }
    }
    /// One call with `cost ≥ 1`: the verdict, recording a pass.
    pub fn acquire(&mut self, now: u64, cost: u64) -> Verdict {
        let v = self.verdict(now, cost);
        if v != Verdict::Reject {
            self.excess = self.next_excess(now, cost);
            self.last = Some(now);
        }
        v
    }
    /// Requests that would pass without delay right now, one by one.
    pub fn remaining(&self, now: u64) -> u64 {
        let mut m = self.clone();
        let mut n = 0;
        while n <= self.burst as u64 + 1 && m.acquire(now, 1) == Verdict::Admit {
            n += 1;
        }
        n
    }
    /// True when the next request would find zero excess.
    pub fn is_idle(&self, now: u64) -> bool {
        self.last.is_none() || self.next_excess(now, 1) == 0
    }
}

/// Fixed window without packing; a rewind stays in the latest window seen.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FixedWindowModel {
    /// Limit per window.
    pub limit: u64,
    /// Window length in ns.
    pub window: u64,
    /// Latest window index seen and its count.
    pub cur: Option<(u64, u64)>,
}

impl FixedWindowModel {
    /// An empty window.
    pub fn new(limit: u64, window: u64) -> Self {
        FixedWindowModel {
            limit,
            window,
            cur: None,
        }
    }
    fn at(&self, now: u64) -> (u64, u64) {
        let idx = now / self.window;
        match self.cur {
            Some((i, c)) if i >= idx && c > 0 => (i, c),
            _ => (idx, 0),
        }
    }
    /// Decide and record (every acquisition records the window it evaluated).
    pub fn acquire(&mut self, now: u64, cost: u64) -> Decision {
        let (i, c) = self.at(now);
        let end = sat((i as u128 + 1) * self.window as u128
            - (now as u128).min((i as u128 + 1) * self.window as u128));
        if c + cost <= self.limit {
            self.cur = Some((i, c + cost));
            Decision {
                verdict: Verdict::Admit,
                remaining: self.limit - c - cost,
                retry_after: Nanos::ZERO,
                reset_after: if c + cost == 0 { Nanos::ZERO } else { end },
            }
        } else {
            self.cur = Some((i, c));
            Decision {
                verdict: Verdict::Reject,
                remaining: self.limit - c,
                retry_after: end,
                reset_after: end,
            }
        }
    }
}

/// Sliding-window counter without packing: estimate `⌈prev·(W−e)/W⌉ + cur`; a rewind
/// stays at the start of the latest window seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlidingCounterModel {
    /// Limit per window.
    pub limit: u64,
    /// Window length in ns.
    pub window: u64,
    /// Latest window index seen, previous and current counts.
    pub state: Option<(u64, u64, u64)>,
}

impl SlidingCounterModel {
    /// An empty counter.
    pub fn new(limit: u64, window: u64) -> Self {
        SlidingCounterModel {
            limit,
            window,
            state: None,
        }
    }
    /// `(index, prev, cur, elapsed)` at `now`.
    fn at(&self, now: u64) -> (u64, u64, u64, u64) {
        let idx = now / self.window;
        let e = now % self.window;
        match self.state {
            None | Some((_, 0, 0)) => (idx, 0, 0, e),
            Some((i, p, c)) if i == idx => (i, p, c, e),
            Some((i, _, c)) if i.checked_add(1) == Some(idx) => (idx, c, 0, e),
            Some((i, p, c)) if i > idx => (i, p, c, 0),
            _ => (idx, 0, 0, e),
        }
    }
    /// The rounded estimate at `now`.
    pub fn estimate(&self, now: u64) -> u64 {
        let (_, p, c, e) = self.at(now);
        let w = self.window as u128;
        ((p as u128 * (w - e as u128)).div_ceil(w)) as u64 + c
    }
    /// Decide (verdict, remaining) and record (every acquisition records its window).
    pub fn acquire(&mut self, now: u64, cost: u64) -> (Verdict, u64) {
        let est = self.estimate(now);
        let (i, p, c, _) = self.at(now);
        if est + cost <= self.limit {
            self.state = Some((i, p, c + cost));
            (Verdict::Admit, self.limit - est - cost)
        } else {
            self.state = Some((i, p, c));
            (Verdict::Reject, self.limit.saturating_sub(est))
        }
    }
}

/// A sliding log as a plain event list; rewinds count as no time passed. Units that can
/// never count again (older than the latest instant seen minus the window) are dropped.
#[derive(Debug, Clone)]
pub struct SlidingLogModel {
    /// Limit per window.
    pub limit: u64,
    /// Window length in ns.
    pub window: u64,
    /// The instants of the admitted units that may still count.
    pub events: heapless::Vec<u64, 4096>,
    /// Latest instant seen by `acquire`.
    pub latest: u64,
}

impl SlidingLogModel {
    /// An empty log.
    pub fn new(limit: u64, window: u64) -> Self {
        SlidingLogModel {
            limit,
            window,
            events: heapless::Vec::new(),
            latest: 0,
        }
    }
    /// Units counted at `now`.
    pub fn count(&self, now: u64) -> u64 {
        let eff = now.max(self.latest);
        self.events
            .iter()
            .filter(|&&t| t.saturating_add(self.window) > eff)
            .count() as u64
    }
    /// Decide (verdict, remaining) and record. `None` when the event list is full.
    pub fn acquire(&mut self, now: u64, cost: u64) -> Option<(Verdict, u64)> {
        self.latest = self.latest.max(now);
        let (window, latest) = (self.window, self.latest);
        self.events.retain(|&t| t.saturating_add(window) > latest);
        let n = self.count(now);
        if n + cost <= self.limit {
            for _ in 0..cost {
                self.events.push(self.latest).ok()?;
            }
            Some((Verdict::Admit, self.limit - n - cost))
        } else {
            Some((Verdict::Reject, self.limit - n))
        }
    }
}
