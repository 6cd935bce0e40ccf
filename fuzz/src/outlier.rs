//! Outlier ejection: the shared machine vs the plain model, over any clock movement.
//!
//! Checked on every operation: `record` reports the same ejection (reason, number, end)
//! and `pick` the same endpoint and panic flag as the model; the healthy set and the
//! ejected count agree; never more than `max_ejectable` ejected, never the only endpoint;
//! an ejection lasts at most `max_ejection`; a pick outside panic is a healthy endpoint.

use crate::num::{N, Tick};
use arbitrary::Arbitrary;
use weir_core::reference::OutlierModel;
use weir_core::{AttemptKind, Choice, EndpointState, Nanos, OutlierConfig, SharedOutlier};

/// A configuration, an endpoint count and an operation sequence.
#[derive(Debug, Arbitrary)]
pub struct Input {
    consecutive_failures: Option<u16>,
    consecutive_5xx: Option<u16>,
    failure_ppm: Option<u32>,
    min_requests: u8,
    interval: N,
    base: N,
    max: N,
    jitter_ppm: u32,
    max_ejection_percent: u8,
    panic_threshold: u8,
    endpoints: u8,
    ops: Vec<Op>,
}

/// One operation.
#[derive(Debug, Arbitrary)]
pub enum Op {
    /// An attempt outcome: endpoint, kind (0 success, 1 5xx, else gateway failure), draw.
    Record(u8, u8, u64),
    /// A pick: round robin (cursor) or two random (draw), and the endpoint to avoid.
    Pick(bool, u64, Option<u8>),
    /// An attempt starts on an endpoint.
    Start(u8),
    /// An attempt ends on an endpoint.
    End(u8),
    /// Move the clock.
    Clock(Tick),
}

/// Runs one input.
pub fn check(input: Input) {
    let cfg = OutlierConfig {
        consecutive_failures: input.consecutive_failures.map(u32::from),
        consecutive_5xx: input.consecutive_5xx.map(u32::from),
        failure_ppm: input.failure_ppm,
        min_requests: u32::from(input.min_requests),
        interval: Nanos(input.interval.0),
        base_ejection: Nanos(input.base.0),
        max_ejection: Nanos(input.max.0),
        jitter_ppm: input.jitter_ppm,
        max_ejection_percent: u32::from(input.max_ejection_percent),
        panic_threshold: u32::from(input.panic_threshold),
    };
    if cfg.validate().is_err() {
        return;
    }
    let n = usize::from(input.endpoints % 16) + 1;
    let eps: Vec<EndpointState> = (0..n).map(|_| EndpointState::new()).collect();
    let shared = SharedOutlier::new();
    let mut model = OutlierModel::new(cfg, n);
    let mut now = 0u64;
    for op in input.ops {
        match op {
            Op::Record(i, k, draw) => {
                let i = usize::from(i) % n;
                let kind = match k % 3 {
                    0 => AttemptKind::Success,
                    1 => AttemptKind::Http5xx,
                    _ => AttemptKind::GatewayFailure,
                };
                let got = shared.record(&cfg, &eps, i, kind, Nanos(now), draw);
                assert_eq!(got, model.record(i, kind, now, draw));
                if let Some(e) = got {
                    assert!(e.until.as_u64().saturating_sub(now) <= cfg.max_ejection.as_u64());
                }
            }
            Op::Pick(rr, v, avoid) => {
                let choice = if rr {
                    Choice::RoundRobin(v as usize)
                } else {
                    Choice::TwoRandom(v)
                };
                let avoid = avoid.map(|a| usize::from(a) % n);
                let got = shared.pick(&cfg, &eps, Nanos(now), choice, avoid).unwrap();
                assert_eq!(got, model.pick(now, choice, avoid));
                assert!(got.index < n);
                assert!(got.panic || eps[got.index].healthy(Nanos(now)));
            }
            Op::Start(i) => model.inflight(&eps, usize::from(i) % n, true),
            Op::End(i) => model.inflight(&eps, usize::from(i) % n, false),
            Op::Clock(t) => now = t.apply(now),
        }
        model.assert_agrees(&shared, &eps, now);
    }
}
