//! `weir.Quota`: a quota's periods and per-key counts — weir-core's [`Period`] and
//! [`QuotaCount`], the same functions the gateway's ledger uses — on a clock whose time
//! is Unix seconds, so period boundaries and event-id idempotency can be explored offline
//! (`ManualClock(start=1_796_000_000)`). Memory only (no ledger file); like the gateway,
//! only the current period is kept: a new period starts every key afresh.

use crate::decision::{PyDecision, issue};
use crate::errors;
use crate::time::{PyManualClock, TimeSource};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use weir_core::{Decision, Nanos, Period, PeriodId, QuotaCount, Verdict};

#[derive(Default)]
struct Key {
    count: QuotaCount,
    consumed: HashSet<String>,
    adjusted: HashSet<String>,
}

struct State {
    period: PeriodId,
    keys: HashMap<String, Key>,
}

/// `weir.Quota(limit, period, clock=None)`: `limit` units per period per key; `period` is
/// `"day"`, `"month"` (UTC calendar) or whole seconds (epoch-aligned). The clock's time is
/// Unix seconds (without a clock: the system's wall clock).
#[pyclass(frozen, module = "weir", name = "Quota")]
pub(crate) struct PyQuota {
    limit: u64,
    period: Period,
    clock: Option<TimeSource>,
    state: Mutex<State>,
}

fn parse_period(p: &Bound<'_, PyAny>) -> PyResult<Period> {
    if let Ok(s) = p.extract::<String>() {
        return match s.as_str() {
            "day" => Ok(Period::Day),
            "month" => Ok(Period::Month),
            _ => Err(PyValueError::new_err(format!(
                "period must be \"day\", \"month\" or whole seconds, got {s:?}"
            ))),
        };
    }
    let secs: f64 = p.extract()?;
    if !(secs >= 1.0 && secs.fract() == 0.0 && secs < 1.8e19) {
        return Err(PyValueError::new_err(format!(
            "period must be a whole number of seconds >= 1, got {secs}"
        )));
    }
    Ok(Period::Every(secs as u64))
}

impl PyQuota {
    fn now_ns(&self) -> Nanos {
        match &self.clock {
            Some(c) => c.now(),
            None => Nanos(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64),
            ),
        }
    }

    /// The state, rolled over to the period containing now.
    fn state(&self) -> (std::sync::MutexGuard<'_, State>, Nanos) {
        let now = self.now_ns();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let id = self.period.at(now.0 / 1_000_000_000);
        if id.start != st.period.start {
            st.period = id;
            st.keys.clear();
        }
        (st, now)
    }

    fn decision(&self, allowed: bool, remaining: u64, end: Nanos, now: Nanos) -> Decision {
        let to_end = end.saturating_sub(now);
        Decision {
            verdict: if allowed {
                Verdict::Admit
            } else {
                Verdict::Reject
            },
            remaining,
            retry_after: if allowed { Nanos::ZERO } else { to_end },
            reset_after: to_end,
        }
    }
}

#[pymethods]
impl PyQuota {
    #[new]
    #[pyo3(signature = (limit, period, clock = None))]
    fn new(
        limit: &Bound<'_, PyAny>,
        period: &Bound<'_, PyAny>,
        clock: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let limit = errors::positive_count("limit", limit)?;
        let period = parse_period(period)?;
        let clock = match clock {
            Some(c) if !c.is_none() => Some(TimeSource::from_arg(Some(c))?),
            _ => None,
        };
        let q = PyQuota {
            limit,
            period,
            clock,
            state: Mutex::new(State {
                period: period.at(0),
                keys: HashMap::new(),
            }),
        };
        drop(q.state());
        Ok(q)
    }

    /// One request of `cost` units for `key`: admitted and consumed, admitted without
    /// consuming (an `event_id` already consumed this period), or rejected with
    /// `retry_after` = seconds to the next period.
    #[pyo3(signature = (key, cost = None, event_id = None), text_signature = "($self, key, cost=1, event_id=None)")]
    fn consume(
        &self,
        py: Python<'_>,
        key: &str,
        cost: Option<&Bound<'_, PyAny>>,
        event_id: Option<&str>,
    ) -> PyResult<Py<PyDecision>> {
        let cost = cost.map_or(Ok(1), |c| errors::count("cost", c))?;
        let (mut st, now) = self.state();
        let end = Nanos::from_secs(st.period.end);
        let k = st.keys.entry(key.to_string()).or_default();
        if let Some(id) = event_id
            && k.consumed.contains(id)
        {
            let rem = k.count.remaining(self.limit);
            return issue(py, self.decision(true, rem, end, now));
        }
        let d = k.count.reserve(self.limit, cost);
        if d.allowed {
            k.count.commit(cost);
            if let Some(id) = event_id {
                k.consumed.insert(id.to_string());
            }
        }
        let dec = self.decision(d.allowed, d.remaining, end, now);
        drop(st);
        issue(py, dec)
    }

    /// A signed adjustment of this period's limit for `key`, idempotent by `event_id`;
    /// `True` when it applied.
    fn adjust(&self, key: &str, amount: i64, event_id: &str) -> bool {
        let (mut st, _) = self.state();
        let k = st.keys.entry(key.to_string()).or_default();
        let fresh = k.adjusted.insert(event_id.to_string());
        if fresh {
            k.count.adjust(amount);
        }
        fresh
    }

    /// Units `key` consumed this period.
    fn used(&self, key: &str) -> u64 {
        self.state().0.keys.get(key).map_or(0, |k| k.count.used)
    }

    /// The signed sum of `key`'s adjustments this period.
    fn adjusted(&self, key: &str) -> i64 {
        self.state().0.keys.get(key).map_or(0, |k| k.count.adjusted)
    }

    /// Units `key` may still consume this period.
    fn remaining(&self, key: &str) -> u64 {
        let limit = self.limit;
        self.state()
            .0
            .keys
            .get(key)
            .map_or(limit, |k| k.count.remaining(limit))
    }

    /// The current period's name: `2026-12`, `2026-12-01`, or its start in Unix seconds.
    fn period(&self) -> String {
        self.state().0.period.to_string()
    }

    /// The current period as `(start, end)` Unix seconds.
    fn period_bounds(&self) -> (u64, u64) {
        let p = self.state().0.period;
        (p.start, p.end)
    }

    #[getter]
    fn limit(&self) -> u64 {
        self.limit
    }

    #[getter]
    fn clock(&self, py: Python<'_>) -> Option<Py<PyManualClock>> {
        self.clock.as_ref().and_then(|c| c.py_object(py))
    }

    fn __repr__(&self) -> String {
        format!(
            "Quota(limit={}, period={:?}, clock={})",
            self.limit,
            self.period(),
            self.clock
                .as_ref()
                .map_or_else(|| "wall".to_string(), TimeSource::describe)
        )
    }
}
