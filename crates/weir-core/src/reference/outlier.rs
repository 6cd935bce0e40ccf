//! The outlier-ejection model: [`crate::outlier`]'s rules over plain fields.

use crate::outlier::{
    AttemptKind, Choice, EjectReason, Ejection, OutlierConfig, Pick, ejection_time, max_ejectable,
};
use crate::outlier::{EndpointState, SharedOutlier};
use crate::time::Nanos;

/// One endpoint as the rules describe it, nothing packed.
#[derive(Debug, Clone, Default)]
pub struct ModelEndpoint {
    /// Gateway-failure streak.
    pub cf: u64,
    /// 5xx streak.
    pub c5: u64,
    /// Ejection number since the last reset.
    pub k: u32,
    /// Out of rotation.
    pub ejected: bool,
    /// End of the current (or last) ejection.
    pub until: u64,
    /// Interval: index (modulo 2^24), attempts, failures.
    pub window: (u64, u64, u64),
    /// Attempts in flight.
    pub inflight: u64,
}

/// Ejection over up to 16 endpoints, by the rules of [`crate::outlier`], nothing packed.
#[derive(Debug, Clone)]
pub struct OutlierModel {
    /// The parameters.
    pub cfg: OutlierConfig,
    /// The endpoints.
    pub eps: heapless::Vec<ModelEndpoint, 16>,
}

impl OutlierModel {
    /// `n` fresh endpoints (at most 16).
    pub fn new(cfg: OutlierConfig, n: usize) -> Self {
        let mut eps = heapless::Vec::new();
        for _ in 0..n {
            eps.push(ModelEndpoint::default())
                .expect("at most 16 endpoints");
        }
        OutlierModel { cfg, eps }
    }

    /// Endpoints out of rotation.
    pub fn ejected(&self) -> usize {
        self.eps.iter().filter(|e| e.ejected).count()
    }

    /// Brings back every endpoint whose ejection ended by `now`.
    pub fn refresh(&mut self, now: u64) {
        for e in &mut self.eps {
            if e.ejected && e.until <= now {
                e.ejected = false;
                e.cf = 0;
                e.c5 = 0;
            }
        }
    }

    /// In panic.
    pub fn panic(&self) -> bool {
        let n = self.eps.len() as u64;
        let healthy = n - self.ejected() as u64;
        healthy == 0 || healthy * 100 < u64::from(self.cfg.panic_threshold) * n
    }

    /// An attempt outcome on endpoint `i`.
    pub fn record(&mut self, i: usize, kind: AttemptKind, now: u64, draw: u64) -> Option<Ejection> {
        self.refresh(now);
        let cfg = self.cfg;
        let max = max_ejectable(self.eps.len(), cfg.max_ejection_percent);
        let ejected = self.ejected();
        let e = &mut self.eps[i];
        if e.ejected {
            return None;
        }
        let idx = (now / cfg.interval.as_u64()) & 0xFF_FFFF;
        if e.window.0 != idx {
            e.window = (idx, 0, 0);
        }
        e.window.1 = (e.window.1 + 1).min(0xF_FFFF);
        let failed = kind != AttemptKind::Success;
        e.window.2 = (e.window.2 + u64::from(failed)).min(0xF_FFFF);
        match kind {
            AttemptKind::Success => (e.cf, e.c5) = (0, 0),
            AttemptKind::Http5xx => (e.cf, e.c5) = (0, (e.c5 + 1).min(0xFFFF)),
            AttemptKind::GatewayFailure => e.cf = (e.cf + 1).min(0xFFFF),
        }
        let reason = if kind == AttemptKind::Http5xx
            && cfg.consecutive_5xx.is_some_and(|t| e.c5 >= u64::from(t))
        {
            Some(EjectReason::Consecutive5xx)
        } else if kind == AttemptKind::GatewayFailure
            && cfg
                .consecutive_failures
                .is_some_and(|t| e.cf >= u64::from(t))
        {
            Some(EjectReason::ConsecutiveFailures)
        } else if failed
            && e.window.1 >= u64::from(cfg.min_requests)
            && cfg
                .failure_ppm
                .is_some_and(|p| e.window.2 * 1_000_000 >= u64::from(p) * e.window.1)
        {
            Some(EjectReason::FailurePercentage)
        } else {
            None
        };
        let reason = reason.filter(|_| ejected < max)?;
        let reset = e.k == 0 || now.saturating_sub(e.until) >= cfg.max_ejection.as_u64();
        e.k = if reset { 1 } else { (e.k + 1).min(255) };
        e.ejected = true;
        (e.cf, e.c5, e.window) = (0, 0, (0, 0, 0));
        e.until = now.saturating_add(ejection_time(&cfg, e.k, draw).as_u64());
        Some(Ejection {
            reason,
            nth: e.k,
            until: Nanos(e.until),
        })
    }

    /// The endpoint chosen.
    pub fn pick(&mut self, now: u64, choice: Choice, avoid: Option<usize>) -> Pick {
        self.refresh(now);
        let panic = self.panic();
        let n = self.eps.len();
        let usable: heapless::Vec<usize, 16> =
            (0..n).filter(|&i| panic || !self.eps[i].ejected).collect();
        let strict: heapless::Vec<usize, 16> = usable
            .iter()
            .copied()
            .filter(|&i| Some(i) != avoid)
            .collect();
        let set = if strict.is_empty() { usable } else { strict };
        let index = match choice {
            Choice::RoundRobin(c) => (0..n).map(|k| (c % n + k) % n).find(|i| set.contains(i)),
            Choice::TwoRandom(r) => {
                let m = set.len() as u64;
                let a = (r % m) as usize;
                if m == 1 {
                    Some(set[a])
                } else {
                    let b = ((r >> 32) % (m - 1)) as usize;
                    let b = if b >= a { b + 1 } else { b };
                    let (x, y) = (set[a], set[b]);
                    Some(if self.eps[y].inflight < self.eps[x].inflight {
                        y
                    } else {
                        x
                    })
                }
            }
        };
        Pick {
            index: index.unwrap_or(0),
            panic,
        }
    }

    /// An attempt starts (`up`) or ends on endpoint `i`, in the model and in `eps`.
    pub fn inflight(&mut self, eps: &[EndpointState], i: usize, up: bool) {
        let f = &mut self.eps[i].inflight;
        if up {
            eps[i].start();
            *f += 1;
        } else {
            eps[i].end();
            *f = f.saturating_sub(1);
        }
    }

    /// Brings the model and `shared` to `now` and panics unless they agree: the ejected
    /// count (never above the maximum), every endpoint's health, panic; a lone endpoint
    /// never ejected.
    pub fn assert_agrees(&mut self, shared: &SharedOutlier, eps: &[EndpointState], now: u64) {
        shared.refresh(eps, Nanos(now));
        self.refresh(now);
        let n = self.eps.len();
        let max = max_ejectable(n, self.cfg.max_ejection_percent);
        assert!(
            shared.ejected() <= max,
            "{} ejected, max {max}",
            shared.ejected()
        );
        assert_eq!(shared.ejected(), self.ejected());
        for (i, e) in eps.iter().enumerate() {
            assert_eq!(e.healthy(Nanos(now)), !self.eps[i].ejected, "endpoint {i}");
        }
        assert_eq!(shared.in_panic(&self.cfg, n), self.panic());
        if n == 1 {
            assert_eq!(eps[0].ejections(), 0, "a lone endpoint was ejected");
        }
    }
}
