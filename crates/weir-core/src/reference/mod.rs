//! Small, obviously-correct reference models of the resilience primitives, for property
//! tests and fuzz targets (not part of the stable API).
//!
//! They favour clarity over speed and use fixed-capacity `heapless` containers (no `alloc`);
//! where a capacity is exceeded a model says so by panicking, which is fine for test oracles.

use crate::breaker::{BreakerConfig, BreakerState, RejectReason, Rejected, Transition};
use crate::rng::Rng;
use crate::time::Nanos;
use heapless::Deque;

mod outlier;
pub use outlier::{ModelEndpoint, OutlierModel};

/// A semaphore as a plain counter.
#[derive(Debug, Clone)]
pub struct SemaphoreModel {
    /// Permits.
    pub max: u64,
    /// Permits held.
    pub used: u64,
}

impl SemaphoreModel {
    /// `max` permits, none held.
    pub fn new(max: u64) -> Self {
        SemaphoreModel { max, used: 0 }
    }
    /// Takes `n` if `used + n <= max` (no overflow).
    pub fn try_acquire(&mut self, n: u64) -> bool {
        match self.used.checked_add(n) {
            Some(v) if v <= self.max => {
                self.used = v;
                true
            }
            _ => false,
        }
    }
    /// Gives `n` back.
    pub fn release(&mut self, n: u64) {
        self.used -= n;
    }
}

/// The exact retry-budget model over an event list, and a checker for an implementation's
/// grants. Time is the highest instant seen (an earlier reading counts as that instant).
#[derive(Debug)]
pub struct RetryBudgetModel {
    ratio_ppm: u128,
    reserve_ppm: u128,
    ttl: u64,
    now: u64,
    /// (instant, is_withdrawal), in instant order.
    events: Deque<(u64, bool), 8192>,
}

impl RetryBudgetModel {
    /// The exact model with `ratio_ppm`, `min_per_sec` and `ttl`.
    pub fn new(ratio_ppm: u32, min_per_sec: u32, ttl: Nanos) -> Self {
        RetryBudgetModel {
            ratio_ppm: u128::from(ratio_ppm),
            reserve_ppm: u128::from(min_per_sec) * u128::from(ttl.0) / 1000,
            ttl: ttl.0,
            now: 0,
            events: Deque::new(),
        }
    }
    fn advance(&mut self, now: Nanos) {
        self.now = self.now.max(now.0);
        let lo = self.now.saturating_sub(self.ttl);
        while let Some(&(t, _)) = self.events.front() {
            // window is (now - ttl, now]; nothing at or before `lo` counts again
            if t <= lo && self.now >= self.ttl {
                self.events.pop_front();
            } else {
                break;
            }
        }
    }
    fn counts(&self) -> (u128, u128) {
        let (mut d, mut w) = (0, 0);
        for &(_, wd) in self.events.iter() {
            if wd {
                w += 1;
            } else {
                d += 1;
            }
        }
        (d, w)
    }
    fn record(&mut self, withdrawal: bool) {
        self.events
            .push_back((self.now, withdrawal))
            .expect("RetryBudgetModel: more than 8192 events within one ttl");
    }
    /// One request.
    pub fn deposit(&mut self, now: Nanos) {
        self.advance(now);
        self.record(false);
    }
    /// The exact model's decision (and state change) for one retry.
    pub fn try_withdraw(&mut self, now: Nanos) -> bool {
        self.advance(now);
        let (d, w) = self.counts();
        let ok = 1_000_000 * (w + 1) <= self.ratio_ppm * d + self.reserve_ppm;
        if ok {
            self.record(true);
        }
        ok
    }
    /// Records a retry that an implementation granted at `now` and returns whether the exact
    /// model allows it (false = the implementation over-granted).
    pub fn check_grant(&mut self, now: Nanos) -> bool {
        self.advance(now);
        self.record(true);
        let (d, w) = self.counts();
        1_000_000 * w <= self.ratio_ppm * d + self.reserve_ppm
    }
    /// Whole retries the exact model would grant now.
    pub fn available(&mut self, now: Nanos) -> u128 {
        self.advance(now);
        let (d, w) = self.counts();
        (self.ratio_ppm * d + self.reserve_ppm).saturating_sub(1_000_000 * w) / 1_000_000
    }
}

/// The ideal exponential schedule `min(max, base × (milli/1000)^(attempt−1))` by repeated
/// multiplication in `f64` (attempt 0 → 0). Slow for huge attempts with tiny multipliers.
pub fn backoff_schedule(base: Nanos, max: Nanos, milli: u32, attempt: u32) -> f64 {
    if attempt == 0 {
        return 0.0;
    }
    let m = f64::from(milli) / 1000.0;
    let mut d = base.0 as f64;
    for _ in 1..attempt {
        if d >= max.0 as f64 || m == 1.0 || d == 0.0 {
            break;
        }
        d *= m;
    }
    if d > max.0 as f64 { max.0 as f64 } else { d }
}

/// A ticket of [`BreakerModel`] (copyable, unlike the real one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelTicket {
    /// Epoch at admission.
    pub epoch: u64,
    /// A HALF_OPEN probe?
    pub probe: bool,
}

#[derive(Debug, Clone, Copy)]
enum MState {
    Closed {
        since: Nanos,
        ramping: bool,
        consec: u32,
    },
    Open {
        until: Nanos,
    },
    HalfOpen {
        deadline: Nanos,
        in_flight: u32,
        successes: u32,
    },
}

/// The breaker rules of `breaker.rs`, written as a plain state machine (window as a queue
/// of outcomes), drawing from its generator at exactly the documented points.
#[derive(Debug)]
pub struct BreakerModel<R: Rng> {
    cfg: BreakerConfig,
    rng: R,
    state: MState,
    k: u32,
    epoch: u64,
    /// (failed, slow), oldest first.
    window: Deque<(bool, bool), 32>,
}

impl<R: Rng> BreakerModel<R> {
    /// A CLOSED breaker (config assumed valid).
    pub fn new(cfg: BreakerConfig, rng: R) -> Self {
        BreakerModel {
            cfg,
            rng,
            state: MState::Closed {
                since: Nanos::ZERO,
                ramping: false,
                consec: 0,
            },
            k: 0,
            epoch: 0,
            window: Deque::new(),
        }
    }

    /// Failed recoveries.
    pub fn failed_recoveries(&self) -> u32 {
        self.k
    }

    /// Probes in flight.
    pub fn probes_in_flight(&self) -> u32 {
        match self.state {
            MState::HalfOpen { in_flight, .. } => in_flight,
            _ => 0,
        }
    }

    /// The state `allow` at `now` would act in.
    pub fn state(&self, now: Nanos) -> BreakerState {
        match self.state {
            MState::Closed { .. } => BreakerState::Closed,
            MState::Open { until } if now >= until => BreakerState::HalfOpen,
            MState::Open { .. } => BreakerState::Open,
            MState::HalfOpen { deadline, .. } if now >= deadline => BreakerState::Open,
            MState::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    fn open(&mut self, now: Nanos, k: u32, from: BreakerState) -> Transition {
        self.epoch += 1;
        self.k = k.min(63);
        let d = self.cfg.cooldown.duration(self.k, &mut self.rng);
        self.state = MState::Open {
            until: now.saturating_add(d),
        };
        Transition {
            at: now,
            from,
            to: BreakerState::Open,
        }
    }

    /// May a call go ahead?
    pub fn allow(&mut self, now: Nanos) -> Result<(ModelTicket, Option<Transition>), Rejected> {
        let rej = |reason, retry_after, transition| Rejected {
            reason,
            retry_after,
            transition,
        };
        match self.state {
            MState::Closed {
                since,
                ramping,
                consec,
            } => {
                if ramping {
                    let elapsed = now.saturating_sub(since);
                    if elapsed >= self.cfg.ramp {
                        self.state = MState::Closed {
                            since,
                            ramping: false,
                            consec,
                        };
                    } else if self.rng.below_inclusive(self.cfg.ramp.0 - 1) >= elapsed.0 {
                        return Err(rej(RejectReason::Ramp, Nanos::ZERO, None));
                    }
                }
                Ok((
                    ModelTicket {
                        epoch: self.epoch,
                        probe: false,
                    },
                    None,
                ))
            }
            MState::Open { until } => {
                if now < until {
                    return Err(rej(RejectReason::Open, until - now, None));
                }
                self.epoch += 1;
                self.state = MState::HalfOpen {
                    deadline: now.saturating_add(self.cfg.probe_timeout),
                    in_flight: 1,
                    successes: 0,
                };
                let t = Transition {
                    at: now,
                    from: BreakerState::Open,
                    to: BreakerState::HalfOpen,
                };
                Ok((
                    ModelTicket {
                        epoch: self.epoch,
                        probe: true,
                    },
                    Some(t),
                ))
            }
            MState::HalfOpen {
                deadline,
                in_flight,
                successes,
            } => {
                if now >= deadline {
                    let t = self.open(now, self.k + 1, BreakerState::HalfOpen);
                    let MState::Open { until } = self.state else {
                        unreachable!()
                    };
                    return Err(rej(RejectReason::Open, until - now, Some(t)));
                }
                if in_flight >= self.cfg.probes {
                    return Err(rej(RejectReason::HalfOpenFull, deadline - now, None));
                }
                self.state = MState::HalfOpen {
                    deadline,
                    in_flight: in_flight + 1,
                    successes,
                };
                Ok((
                    ModelTicket {
                        epoch: self.epoch,
                        probe: true,
                    },
                    None,
                ))
            }
        }
    }

    /// Records an outcome.
    pub fn record(
        &mut self,
        t: ModelTicket,
        now: Nanos,
        duration: Nanos,
        failed: bool,
    ) -> Option<Transition> {
        if t.epoch != self.epoch {
            return None;
        }
        match (self.state, t.probe) {
            (
                MState::HalfOpen {
                    deadline,
                    in_flight,
                    successes,
                },
                true,
            ) => {
                if failed {
                    return Some(self.open(now, self.k + 1, BreakerState::HalfOpen));
                }
                if successes + 1 >= self.cfg.successes {
                    self.epoch += 1;
                    self.window.clear();
                    self.state = MState::Closed {
                        since: now,
                        ramping: !self.cfg.ramp.is_zero(),
                        consec: 0,
                    };
                    return Some(Transition {
                        at: now,
                        from: BreakerState::HalfOpen,
                        to: BreakerState::Closed,
                    });
                }
                self.state = MState::HalfOpen {
                    deadline,
                    in_flight: in_flight.saturating_sub(1),
                    successes: successes + 1,
                };
                None
            }
            (
                MState::Closed {
                    since,
                    ramping,
                    consec,
                },
                false,
            ) => {
                let consec = if failed { (consec + 1).min(0xFFFF) } else { 0 };
                self.state = MState::Closed {
                    since,
                    ramping,
                    consec,
                };
                let mut trips =
                    failed && matches!(self.cfg.consecutive_failures, Some(n) if consec >= n);
                if self.cfg.failure_rate_ppm.is_some() || self.cfg.slow_call.is_some() {
                    let slow = matches!(self.cfg.slow_call, Some(s) if duration > s.threshold);
                    if self.window.len() == self.cfg.window as usize {
                        self.window.pop_front();
                    }
                    self.window.push_back((failed, slow)).ok();
                    let calls = self.window.len() as u64;
                    let fails = self.window.iter().filter(|o| o.0).count() as u64;
                    let slows = self.window.iter().filter(|o| o.1).count() as u64;
                    if calls >= u64::from(self.cfg.min_calls) {
                        trips |= matches!(self.cfg.failure_rate_ppm,
                            Some(r) if fails * 1_000_000 >= u64::from(r) * calls);
                        trips |= matches!(self.cfg.slow_call,
                            Some(s) if slows * 1_000_000 >= u64::from(s.rate_ppm) * calls);
                    }
                }
                if trips {
                    let healthy = now >= since.saturating_add(self.cfg.cooldown.max);
                    let k = if healthy { 0 } else { self.k };
                    return Some(self.open(now, k, BreakerState::Closed));
                }
                None
            }
            _ => None,
        }
    }

    /// Returns a ticket without outcome.
    pub fn cancel(&mut self, t: ModelTicket) {
        if let MState::HalfOpen {
            deadline,
            in_flight,
            successes,
        } = self.state
            && t.probe
            && t.epoch == self.epoch
        {
            self.state = MState::HalfOpen {
                deadline,
                in_flight: in_flight.saturating_sub(1),
                successes,
            };
        }
    }
}

mod limiters;
pub use limiters::*;
