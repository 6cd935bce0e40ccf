//! The breaker step of a request: the route's shared breaker (kept across reloads while
//! its parameters are unchanged), a ticket per attempt, transitions counted into the
//! metrics and kept for `/admin/breakers`.

use super::layer::{BreakerPolicy, breaker_config};
use crate::metrics::RouteMetrics;
use crate::outcome::Outcome;
use std::sync::{Arc, Mutex};
use weir_core::{BreakerConfig, BreakerState, Nanos, SharedBreaker, Ticket, Transition};

/// A route's breaker runtime.
pub(crate) struct Breaker {
    params: BreakerPolicy,
    cfg: BreakerConfig,
    core: SharedBreaker,
    /// The latest transition (for `/admin/breakers`).
    last: Mutex<Option<Transition>>,
}

impl Breaker {
    /// The runtime of `p` (validated by the compiler), keeping `prev` when unchanged;
    /// `seed` drives the cooldown jitter and the ramp.
    pub(crate) fn build(
        p: &BreakerPolicy,
        total: Nanos,
        seed: u64,
        prev: Option<&Arc<Breaker>>,
    ) -> Arc<Breaker> {
        let cfg = breaker_config(p, total).expect("validated breaker");
        prev.filter(|s| s.params == *p && s.cfg == cfg)
            .cloned()
            .unwrap_or_else(|| {
                Arc::new(Breaker {
                    params: p.clone(),
                    cfg,
                    core: SharedBreaker::new(cfg, seed).expect("validated breaker"),
                    last: Mutex::new(None),
                })
            })
    }

    /// The breaker step before an attempt: a ticket, or `circuit_open`.
    pub(crate) fn admit(&self, m: &RouteMetrics, now: Nanos) -> Result<Ticket, Outcome> {
        match self.core.allow(now) {
            Ok(a) => {
                self.transition(m, a.transition, now);
                Ok(a.ticket)
            }
            Err(r) => {
                self.transition(m, r.transition, now);
                Err(Outcome::CircuitOpen)
            }
        }
    }

    /// Records an attempt's result on its ticket.
    pub(crate) fn record(
        &self,
        m: &RouteMetrics,
        ticket: Ticket,
        now: Nanos,
        elapsed: Nanos,
        result: &crate::attempt::AttemptResult,
    ) {
        let t = self
            .core
            .record(ticket, now, elapsed, self.params.failure_on.matches(result));
        self.transition(m, t, now);
    }

    /// Gives a ticket back unused (the request ended without an attempt result).
    pub(crate) fn cancel(&self, ticket: Ticket) {
        self.core.cancel(ticket);
    }

    /// Whether retries are pointless now (the breaker is open).
    pub(crate) fn is_open(&self, now: Nanos) -> bool {
        self.core.state(now) == BreakerState::Open
    }

    fn transition(&self, m: &RouteMetrics, t: Option<Transition>, now: Nanos) {
        if let Some(t) = t {
            m.transition(t.from, t.to);
            *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
        }
        self.observe(m, now);
    }

    /// Reads the state into the route's gauge.
    pub(crate) fn observe(&self, m: &RouteMetrics, now: Nanos) -> BreakerState {
        let st = self.core.state(now);
        if let Some(g) = &m.breaker_state {
            g.set(i64::from(st.as_gauge()));
        }
        st
    }

    /// One entry of `/admin/breakers`.
    pub(crate) fn json(&self, route: &str, m: &RouteMetrics, now: Nanos) -> serde_json::Value {
        let st = self.observe(m, now);
        let p = &self.params;
        let last = *self.last.lock().unwrap_or_else(|p| p.into_inner());
        serde_json::json!({
            "route": route,
            "state": st.as_str(),
            "gauge": st.as_gauge(),
            "failed_recoveries": self.core.failed_recoveries(),
            "probes_in_flight": self.core.probes_in_flight(),
            "last_transition": last.map(|t| serde_json::json!({
                "from": t.from.as_str(),
                "to": t.to.as_str(),
                "ago_ms": now.saturating_sub(t.at).as_millis(),
            })),
            "config": {
                "failure_on": p.failure_on.names,
                "consecutive_failures": p.consecutive_failures,
                "failure_rate": p.failure_rate,
                "window": p.window,
                "min_calls": p.min_calls,
                "slow_call": p.slow_call,
                "slow_call_rate": p.slow_call_rate,
                "cooldown": {
                    "base": p.cooldown_base,
                    "max": p.cooldown_max,
                    "multiplier": p.cooldown_multiplier,
                    "jitter": p.cooldown_jitter,
                },
                "half_open": {"probes": p.probes, "successes": p.successes},
                "ramp": p.ramp,
                "probe_timeout": crate::dur::Dur(self.cfg.probe_timeout.into()),
            },
        })
    }
}
