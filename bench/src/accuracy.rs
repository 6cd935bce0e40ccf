//! The accuracy suite: seeded arrival traces run through weir's token bucket and through
//! peers (or faithful small models of them) on a deterministic clock, each compared with
//! the exact ideal GCRA.
//!
//! Every limiter is configured for the same limit — `rate` per `per`, at most `burst` at
//! once — the way its users would write it:
//! - **ideal**: GCRA in exact rational arithmetic (time in units of `1/rate` ns, so the
//!   emission interval `per/rate` is the integer `per`). Written here independently of
//!   weir's implementation.
//! - **weir**: `weir_core::TokenBucket::acquire(now, 1)`.
//! - **governor**: governor 0.10 itself on its `FakeRelativeClock`, with
//!   `Quota::with_period(per / rate).allow_burst(burst)` (what `Quota::per_second` does):
//!   `Duration / u32` rounds the emission interval *down* to whole ns.
//! - **nginx**: `limit_req` (ngx_http_limit_req_module.c, `ngx_http_limit_req_lookup`):
//!   time in whole ms, `excess` in 1/1000 requests, `rate` only as r/s or r/m; nginx's
//!   `burst` counts requests *beyond the first*, so `burst = B − 1` gives capacity `B`
//!   (`nodelay`). Not configurable (`n/a`) for other periods.
//! - **SCG Lua (seed 003)**: Spring Cloud Gateway's `request_rate_limiter.lua`: `now` is
//!   Redis `TIME` in whole seconds, `replenishRate` an integer per second, keys expire after
//!   `floor(2 · capacity / rate)` s and are not written at all when that is 0. A limit of
//!   1 per `p` s is written the documented way: `replenishRate = 1`, `requestedTokens = p`,
//!   `burstCapacity = burst · p`.
//! - **Lua (seed 004)**: the hand-written Redis + Lua bucket of seed 004: whole-second
//!   `now`, `floor((now − last_time) · rate)` tokens added, `last_time` reset on admit.
//! - **fixed window**: `rate` per aligned window of length `per`.
//!
//! The trace clock starts at 0, aligned to a second boundary.

use governor::clock::FakeRelativeClock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos as GNanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use std::fmt::Write as _;
use std::num::NonZeroU32;
use std::time::Duration;
use weir_core::{Nanos, Rng, SplitMix64, TokenBucket};

const SEC: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// A limit: `rate` admissions per `per` ns, at most `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Admissions per period.
    pub rate: u64,
    /// The period in ns.
    pub per: u64,
    /// Capacity.
    pub burst: u64,
}

impl Limit {
    /// `rate` per second, capacity `burst`.
    pub const fn per_second(rate: u64, burst: u64) -> Limit {
        Limit {
            rate,
            per: SEC,
            burst,
        }
    }
}

impl Limit {
    fn describe(&self) -> String {
        let per = match self.per {
            p if p == 86_400 * SEC => "day".to_string(),
            p if p % SEC == 0 && p / SEC == 1 => "s".to_string(),
            p if p % SEC == 0 => format!("{} s", p / SEC),
            p if p % 1_000 == 0 => format!("{} µs", p / 1_000),
            p => format!("{p} ns"),
        };
        format!("{}/{}, burst {}", self.rate, per, self.burst)
    }
}

/// A named arrival trace (instants in ns, non-decreasing) and the limit applied to it.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Short name.
    pub name: &'static str,
    /// What it exercises.
    pub about: &'static str,
    /// The limit every limiter is configured with.
    pub limit: Limit,
    /// Arrival instants, ns.
    pub arrivals: Vec<u64>,
}

/// Exponential inter-arrival gap (Poisson process) with mean `mean_ns`.
fn exp_gap(rng: &mut SplitMix64, mean_ns: f64) -> u64 {
    let u = 1.0 - rng.unit_f64(); // (0, 1]
    (-u.ln() * mean_ns) as u64
}

fn poisson(rng: &mut SplitMix64, start: u64, end: u64, per_sec: f64, out: &mut Vec<u64>) {
    let mean = SEC as f64 / per_sec;
    let mut t = start;
    loop {
        t += exp_gap(rng, mean);
        if t >= end {
            break;
        }
        out.push(t);
    }
}

/// `n` arrivals uniform in `[start, start + span)`, sorted.
fn clump(rng: &mut SplitMix64, start: u64, span: u64, n: usize, out: &mut Vec<u64>) {
    let mut v: Vec<u64> = (0..n).map(|_| start + rng.next_u64() % span).collect();
    v.sort_unstable();
    out.extend(v);
}

/// The traces of the suite, generated from `seed`.
pub fn traces(seed: u64) -> Vec<Trace> {
    let mut rng = SplitMix64::new(seed);
    let mut out = Vec::new();

    let mut a = Vec::new();
    poisson(&mut rng, 0, 600 * SEC, 10.0, &mut a);
    out.push(Trace {
        name: "steady",
        about: "Poisson 10/s for 10 min",
        limit: Limit::per_second(7, 7),
        arrivals: a,
    });

    // At the rate, on a whole-ns grid: arrival i at ⌈i·10⁹/3⌉ ns. The gaps alternate
    // 333 333 333 / 333 333 334 ns around T = 333 333 333.3̅ ns, and burst 1 means "gaps of
    // at least T", so the ideal admits 2 of every 3; a T rounded down admits all.
    out.push(Trace {
        name: "at-rate",
        about: "arrival i at ⌈i·10⁹/3⌉ ns for 1 h: gaps alternate just under / just over T",
        limit: Limit::per_second(3, 1),
        arrivals: (0..3 * 3600u64).map(|i| (i * SEC).div_ceil(3)).collect(),
    });

    let mut a = Vec::new();
    let jitter = 5 * MS;
    for i in 0..7 * 3600u64 {
        let base = (i * SEC).div_ceil(7) + jitter;
        a.push(base - jitter + rng.next_u64() % (2 * jitter));
    }
    a.sort_unstable();
    out.push(Trace {
        name: "at-rate-jitter",
        about: "7/s ± 5 ms jitter for 1 h",
        limit: Limit::per_second(7, 2),
        arrivals: a,
    });

    let mut a = Vec::new();
    let mut t = 0;
    while t < 600 * SEC {
        poisson(&mut rng, t, t + 2 * SEC, 50.0, &mut a);
        t += 7 * SEC;
    }
    out.push(Trace {
        name: "bursty",
        about: "on 2 s at Poisson 50/s, off 5 s; 10 min",
        limit: Limit::per_second(7, 20),
        arrivals: a,
    });

    let mut a = Vec::new();
    let mut t = 0;
    while t < 600 * SEC {
        clump(&mut rng, t, 10 * MS, 150, &mut a);
        t += 3 * SEC + rng.next_u64() % SEC;
    }
    out.push(Trace {
        name: "micro-burst",
        about: "150 within 10 ms every 3–4 s; 10 min",
        limit: Limit::per_second(100, 100),
        arrivals: a,
    });

    let mut a = Vec::new();
    clump(&mut rng, 0, 50 * MS, 30, &mut a);
    let t = 3600 * SEC + SEC / 2;
    clump(&mut rng, t, 50 * MS, 30, &mut a);
    poisson(&mut rng, t + 50 * MS, t + 60 * SEC, 5.0, &mut a);
    out.push(Trace {
        name: "idle-then-burst",
        about: "30 at once, idle 1 h, 30 at once, Poisson 5/s for 1 min",
        limit: Limit::per_second(3, 10),
        arrivals: a,
    });

    let mut a = Vec::new();
    poisson(&mut rng, 0, 90 * 86_400 * SEC, 3.0 / 86_400.0, &mut a);
    out.push(Trace {
        name: "daily",
        about: "Poisson 3/day for 90 days",
        limit: Limit {
            rate: 1,
            per: 86_400 * SEC,
            burst: 2,
        },
        arrivals: a,
    });

    let mut a = Vec::new();
    poisson(&mut rng, 0, 20 * MS, 6.0e6, &mut a);
    out.push(Trace {
        name: "fast",
        about: "Poisson 6/µs for 20 ms (3 M/s limit)",
        limit: Limit {
            rate: 3,
            per: 1_000,
            burst: 3,
        },
        arrivals: a,
    });
    out
}

/// A limiter under test: admits or rejects one request at each instant.
pub trait Model {
    /// One request at `t` ns.
    fn admit(&mut self, t: u64) -> bool;
}

/// The exact ideal: GCRA with rational emission interval `per / rate`.
#[derive(Debug)]
pub struct Ideal {
    per: u128,
    window: u128,
    rate: u128,
    tat: u128,
}

impl Ideal {
    /// Full at time 0.
    pub fn new(l: Limit) -> Self {
        Ideal {
            per: l.per as u128,
            window: l.burst as u128 * l.per as u128,
            rate: l.rate as u128,
            tat: 0,
        }
    }
}

impl Model for Ideal {
    fn admit(&mut self, t: u64) -> bool {
        // Units of 1/rate ns: the emission interval is exactly `per` units.
        let now = t as u128 * self.rate;
        let start = self.tat.max(now);
        if start + self.per <= now + self.window {
            self.tat = start + self.per;
            true
        } else {
            false
        }
    }
}

/// weir's single-owner token bucket.
pub struct Weir(TokenBucket);

impl Weir {
    /// Full at time 0.
    pub fn new(l: Limit) -> Self {
        Weir(TokenBucket::new(l.rate, Nanos(l.per), l.burst).expect("valid limit"))
    }
}

impl Model for Weir {
    fn admit(&mut self, t: u64) -> bool {
        self.0
            .acquire(Nanos(t), 1)
            .map(|d| d.is_allowed())
            .unwrap_or(false)
    }
}

/// governor 0.10 itself, on its fake clock.
pub struct Governor {
    limiter: RateLimiter<NotKeyed, InMemoryState, FakeRelativeClock, NoOpMiddleware<GNanos>>,
    clock: FakeRelativeClock,
    now: u64,
}

impl Governor {
    /// `Quota::with_period(per / rate).allow_burst(burst)`; `None` when governor cannot
    /// express it.
    pub fn new(l: Limit) -> Option<Self> {
        let rate = u32::try_from(l.rate).ok()?;
        let burst = NonZeroU32::new(u32::try_from(l.burst).ok()?)?;
        let quota = Quota::with_period(Duration::from_nanos(l.per) / rate)?.allow_burst(burst);
        let clock = FakeRelativeClock::default();
        Some(Governor {
            limiter: RateLimiter::direct_with_clock(quota, clock.clone()),
            clock,
            now: 0,
        })
    }
}

impl Model for Governor {
    fn admit(&mut self, t: u64) -> bool {
        if t > self.now {
            self.clock.advance(Duration::from_nanos(t - self.now));
            self.now = t;
        }
        self.limiter.check().is_ok()
    }
}

/// nginx `limit_req ... burst=B-1 nodelay`: ms time, excess in 1/1000 requests.
#[derive(Debug)]
pub struct Nginx {
    /// Requests per 1000 s (nginx's `ctx->rate`: r/s × 1000, or r/m × 1000 / 60).
    rate: i64,
    /// `burst × 1000`.
    burst: i64,
    /// `None` until the first request creates the node.
    node: Option<(i64, u64)>,
}

impl Nginx {
    /// `None` unless the period is 1 s or 60 s (nginx accepts only r/s and r/m).
    pub fn new(l: Limit) -> Option<Self> {
        let rate = match l.per {
            p if p == SEC => l.rate as i64 * 1000,
            p if p == 60 * SEC => l.rate as i64 * 1000 / 60,
            _ => return None,
        };
        Some(Nginx {
            rate,
            burst: (l.burst as i64 - 1) * 1000,
            node: None,
        })
    }
}

impl Model for Nginx {
    fn admit(&mut self, t: u64) -> bool {
        let now = t / MS;
        let Some((excess_old, last)) = self.node else {
            // A new node: excess 0, admitted.
            self.node = Some((0, now));
            return true;
        };
        let ms = now as i64 - last as i64;
        let ms = if ms < -60_000 { 1 } else { ms.max(0) };
        let excess = (excess_old - self.rate * ms / 1000 + 1000).max(0);
        if excess > self.burst {
            return false;
        }
        let last = if ms != 0 { now } else { last };
        self.node = Some((excess, last));
        true
    }
}

/// Spring Cloud Gateway's Redis Lua token bucket (seed 003).
#[derive(Debug)]
pub struct ScgLua {
    rate: f64,
    capacity: f64,
    requested: f64,
    ttl_ns: u64,
    /// (tokens, timestamp seconds, expires at ns)
    stored: Option<(f64, f64, u64)>,
}

impl ScgLua {
    /// `None` when the limit has no SCG configuration (rate not a whole number per second
    /// and not 1 per a whole number of seconds).
    pub fn new(l: Limit) -> Option<Self> {
        let (rate, capacity, requested) = if l.per == SEC {
            (l.rate, l.burst, 1)
        } else if l.rate == 1 && l.per.is_multiple_of(SEC) {
            let p = l.per / SEC;
            (1, l.burst * p, p)
        } else {
            return None;
        };
        let (rate, capacity, requested) = (rate as f64, capacity as f64, requested as f64);
        let fill_time = capacity / rate;
        Some(ScgLua {
            rate,
            capacity,
            requested,
            ttl_ns: (fill_time * 2.0).floor() as u64 * SEC,
            stored: None,
        })
    }
}

impl Model for ScgLua {
    fn admit(&mut self, t: u64) -> bool {
        let now = (t / SEC) as f64;
        let live = self.stored.filter(|&(_, _, exp)| t < exp);
        let (last_tokens, last_refreshed) = live.map_or((self.capacity, 0.0), |(k, r, _)| (k, r));
        let delta = (now - last_refreshed).max(0.0);
        let filled = self.capacity.min(last_tokens + delta * self.rate);
        let allowed = filled >= self.requested;
        let new_tokens = if allowed {
            filled - self.requested
        } else {
            filled
        };
        if self.ttl_ns > 0 {
            self.stored = Some((new_tokens, now, t + self.ttl_ns));
        } else {
            self.stored = None;
        }
        allowed
    }
}

/// The hand-written Redis + Lua bucket of seed 004.
#[derive(Debug)]
pub struct Seed004Lua {
    capacity: f64,
    /// Tokens per second.
    rate: f64,
    /// (tokens, last_time seconds)
    stored: Option<(f64, f64)>,
}

impl Seed004Lua {
    /// Always expressible (a float rate per second).
    pub fn new(l: Limit) -> Self {
        Seed004Lua {
            capacity: l.burst as f64,
            rate: l.rate as f64 * SEC as f64 / l.per as f64,
            stored: None,
        }
    }
}

impl Model for Seed004Lua {
    fn admit(&mut self, t: u64) -> bool {
        let now = (t / SEC) as f64;
        let (current, last_time) = self.stored.unwrap_or((self.capacity, 0.0));
        let delta = ((now - last_time) * self.rate).floor();
        let tokens = self.capacity.min(current + delta);
        if tokens > 0.0 {
            self.stored = Some((tokens - 1.0, now));
            true
        } else {
            // Nothing is written on reject (tokens and last_time keep their old values).
            false
        }
    }
}

/// `rate` per aligned window of `per` ns.
#[derive(Debug)]
pub struct FixedWindow {
    per: u64,
    limit: u64,
    window: u64,
    count: u64,
}

impl FixedWindow {
    /// Windows `[k·per, (k+1)·per)`.
    pub fn new(l: Limit) -> Self {
        FixedWindow {
            per: l.per,
            limit: l.rate,
            window: 0,
            count: 0,
        }
    }
}

impl Model for FixedWindow {
    fn admit(&mut self, t: u64) -> bool {
        let w = t / self.per;
        if w != self.window {
            self.window = w;
            self.count = 0;
        }
        if self.count < self.limit {
            self.count += 1;
            true
        } else {
            false
        }
    }
}

/// One limiter's result on one trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Requests admitted.
    pub admitted: u64,
    /// Events whose decision differs from the ideal's.
    pub disagreements: u64,
}

/// The columns of the table, in order.
pub const COLUMNS: [&str; 7] = [
    "ideal",
    "weir",
    "governor",
    "nginx",
    "SCG Lua (003)",
    "Lua (004)",
    "fixed window",
];

/// Runs `trace` through every column; `None` where that limiter cannot express the limit.
pub fn run(trace: &Trace) -> Vec<Option<Outcome>> {
    let l = trace.limit;
    let mut ideal = Ideal::new(l);
    let reference: Vec<bool> = trace.arrivals.iter().map(|&t| ideal.admit(t)).collect();
    let models: Vec<Option<Box<dyn Model>>> = vec![
        Some(Box::new(Ideal::new(l))),
        Some(Box::new(Weir::new(l))),
        Governor::new(l).map(|m| Box::new(m) as Box<dyn Model>),
        Nginx::new(l).map(|m| Box::new(m) as Box<dyn Model>),
        ScgLua::new(l).map(|m| Box::new(m) as Box<dyn Model>),
        Some(Box::new(Seed004Lua::new(l))),
        Some(Box::new(FixedWindow::new(l))),
    ];
    models
        .into_iter()
        .map(|m| {
            let mut m = m?;
            let mut o = Outcome {
                admitted: 0,
                disagreements: 0,
            };
            for (&t, &r) in trace.arrivals.iter().zip(&reference) {
                let a = m.admit(t);
                o.admitted += u64::from(a);
                o.disagreements += u64::from(a != r);
            }
            Some(o)
        })
        .collect()
}

/// The markdown table of the suite for `seed`.
pub fn markdown(seed: u64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Seed {seed}. Each cell: admitted (difference from the ideal; events decided \
         differently from the ideal). `n/a`: that limiter cannot be configured for the limit.\n"
    );
    let _ = write!(s, "| trace | limit | arrivals |");
    for c in COLUMNS {
        let _ = write!(s, " {c} |");
    }
    let _ = write!(s, "\n|---|---|---:|");
    for _ in COLUMNS {
        let _ = write!(s, "---:|");
    }
    s.push('\n');
    for tr in traces(seed) {
        let res = run(&tr);
        let ideal = res[0].map_or(0, |o| o.admitted) as i64;
        let _ = write!(
            s,
            "| {} | {} | {} |",
            tr.name,
            tr.limit.describe(),
            tr.arrivals.len()
        );
        for (i, r) in res.iter().enumerate() {
            let cell = match r {
                None => "n/a".to_string(),
                Some(o) if i == 0 => o.admitted.to_string(),
                Some(o) if o.disagreements == 0 => format!("{} (exact)", o.admitted),
                Some(o) => format!(
                    "{} ({:+}; {})",
                    o.admitted,
                    o.admitted as i64 - ideal,
                    o.disagreements
                ),
            };
            let _ = write!(s, " {cell} |");
        }
        s.push('\n');
    }
    s.push_str("\nTraces:\n");
    for tr in traces(seed) {
        let _ = writeln!(s, "- `{}`: {}.", tr.name, tr.about);
    }
    s
}

/// The seed the published table uses.
pub const SEED: u64 = 9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ideal_admits_burst_then_rate() {
        let l = Limit::per_second(3, 2);
        let mut m = Ideal::new(l);
        assert!(m.admit(0) && m.admit(0) && !m.admit(0));
        assert!(!m.admit(333_333_333));
        assert!(m.admit(333_333_334));
    }

    #[test]
    fn nginx_burst_counts_beyond_the_first() {
        let l = Limit::per_second(1, 3);
        let mut m = Nginx::new(l).unwrap();
        assert_eq!((0..5).filter(|_| m.admit(0)).count(), 3);
        assert!(m.admit(SEC));
        assert!(!m.admit(SEC));
    }

    #[test]
    fn scg_whole_seconds() {
        let l = Limit::per_second(2, 2);
        let mut m = ScgLua::new(l).unwrap();
        assert!(m.admit(0) && m.admit(1) && !m.admit(999_999_999));
        assert!(m.admit(SEC) && m.admit(SEC + 1) && !m.admit(SEC + 2));
    }
}
