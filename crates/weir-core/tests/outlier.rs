//! The outlier ejection machine against the plain reference model of its rules
//! (`weir_core::reference::OutlierModel`), on a manual time line: every ejection (reason, number,
//! end), every pick, the healthy set and panic agree, and the invariants hold — never
//! more than the maximum ejected, never a lone host, jitter within bounds, the pool never
//! empty.
//!
//! Not under miri: proptest's machinery in the interpreter takes minutes per case. Miri runs
//! the machine's unit tests in `src/outlier.rs` (see docs/VERIFICATION.md).
#![cfg(not(miri))]

use proptest::prelude::*;
use weir_core::reference::OutlierModel;
use weir_core::{AttemptKind, Choice, EndpointState, Nanos, OutlierConfig, SharedOutlier};

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Record(usize, AttemptKind, u64),
    Pick(Choice, Option<usize>),
    Start(usize),
    End(usize),
}

fn kind() -> impl Strategy<Value = AttemptKind> {
    prop_oneof![
        2 => Just(AttemptKind::Success),
        3 => Just(AttemptKind::Http5xx),
        3 => Just(AttemptKind::GatewayFailure),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u64..400).prop_map(Op::Advance),
        8 => (0usize..8, kind(), any::<u64>()).prop_map(|(i, k, d)| Op::Record(i, k, d)),
        3 => (any::<usize>(), any::<bool>(), proptest::option::of(0usize..8)).prop_map(
            |(c, rr, avoid)| {
                let choice = if rr {
                    Choice::RoundRobin(c)
                } else {
                    Choice::TwoRandom(c as u64 ^ 0xA5A5_5A5A_1234_5678)
                };
                Op::Pick(choice, avoid)
            }
        ),
        1 => (0usize..8).prop_map(Op::Start),
        1 => (0usize..8).prop_map(Op::End),
    ]
}

fn config() -> impl Strategy<Value = OutlierConfig> {
    (
        (
            proptest::option::of(1u32..5),
            proptest::option::of(1u32..5),
            proptest::option::of(0u32..=1_000_000),
            1u32..6,
            1u64..300,
        ),
        (
            1u64..200,
            0u64..400,
            0u32..=1_000_000,
            0u32..=100,
            0u32..=100,
        ),
    )
        .prop_map(
            |((cf, c5, ppm, min, interval), (base, extra, jit, max_pct, panic))| OutlierConfig {
                consecutive_failures: cf,
                consecutive_5xx: c5,
                failure_ppm: ppm,
                min_requests: min,
                interval: Nanos(interval),
                base_ejection: Nanos(base),
                max_ejection: Nanos(base + extra),
                jitter_ppm: jit,
                max_ejection_percent: max_pct,
                panic_threshold: panic,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_the_reference(cfg in config(), n in 1usize..6, ops in prop::collection::vec(op(), 1..120)) {
        prop_assert_eq!(cfg.validate(), Ok(()));
        let eps: Vec<EndpointState> = (0..n).map(|_| EndpointState::new()).collect();
        let shared = SharedOutlier::new();
        let mut model = OutlierModel::new(cfg, n);
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Advance(d) => now += d,
                Op::Record(i, k, draw) => {
                    let i = i % n;
                    let got = shared.record(&cfg, &eps, i, k, Nanos(now), draw);
                    let want = model.record(i, k, now, draw);
                    prop_assert_eq!(got, want);
                    if let Some(e) = got {
                        let d = e.until.as_u64() - now;
                        let exact = (cfg.base_ejection.as_u64() * u64::from(e.nth))
                            .min(cfg.max_ejection.as_u64());
                        let span = exact * u64::from(cfg.jitter_ppm) / 1_000_000;
                        prop_assert!(d + span >= exact && d <= exact + span);
                        prop_assert!(d <= cfg.max_ejection.as_u64());
                    }
                }
                Op::Pick(choice, avoid) => {
                    let got = shared.pick(&cfg, &eps, Nanos(now), choice, avoid.map(|a| a % n));
                    let want = model.pick(now, choice, avoid.map(|a| a % n));
                    prop_assert_eq!(got, Some(want));
                }
                Op::Start(i) => model.inflight(&eps, i % n, true),
                Op::End(i) => model.inflight(&eps, i % n, false),
            }
            model.assert_agrees(&shared, &eps, now);
        }
    }
}
