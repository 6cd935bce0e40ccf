//! Simulated upstreams: latency (constant or a sequence sampled in order), an error rate
//! (seeded) and outage windows in which connections are refused.

use std::cell::RefCell;
use std::time::Duration;
use weir_core::{Nanos, Rng, SplitMix64};
use weir_policy::{AttemptResult, Dur};

/// How one simulated upstream behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamModel {
    /// Time to the response head, one per attempt in order, cycling (one item: constant).
    pub latency: Vec<Duration>,
    /// Probability in `0..=1` that an answer is a 503.
    pub errors: f64,
    /// `[start, end)` windows (the trace's own time) in which connections are refused.
    pub outages: Vec<(Nanos, Nanos)>,
}

impl Default for UpstreamModel {
    /// Latency 1 ms, no errors, no outage.
    fn default() -> Self {
        UpstreamModel {
            latency: vec![Duration::from_millis(1)],
            errors: 0.0,
            outages: Vec::new(),
        }
    }
}

impl UpstreamModel {
    /// Parses `latency:20ms,errors:0.01,outage:10s-20s` (each part optional, `outage`
    /// repeatable; `latency:10ms|20ms|50ms` is a sequence sampled in order).
    pub fn parse(spec: &str) -> Result<UpstreamModel, String> {
        let mut m = UpstreamModel::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once(':')
                .ok_or_else(|| format!("{part:?}: expected KEY:VALUE (latency, errors, outage)"))?;
            match k.trim() {
                "latency" => {
                    m.latency = v
                        .split('|')
                        .map(|d| Dur::parse(d).map(|d| d.0))
                        .collect::<Result<_, _>>()
                        .map_err(|e| format!("latency: {e}"))?;
                }
                "errors" => {
                    m.errors = v
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|e| (0.0..=1.0).contains(e))
                        .ok_or_else(|| format!("errors: {v:?} is not a probability in 0..=1"))?;
                }
                "outage" => {
                    let (a, b) = v.split_once('-').ok_or_else(|| {
                        format!("outage: {v:?}: expected START-END, e.g. 10s-20s")
                    })?;
                    let (a, b) = (Dur::parse(a)?.0, Dur::parse(b)?.0);
                    if b <= a {
                        return Err(format!("outage: {v:?}: the end must be after the start"));
                    }
                    m.outages.push((a.into(), b.into()));
                }
                other => {
                    return Err(format!(
                        "unknown key {other:?} (expected latency, errors or outage)"
                    ));
                }
            }
        }
        m.validate()?;
        Ok(m)
    }

    /// At least one latency; an error rate that is a probability.
    pub fn validate(&self) -> Result<(), String> {
        if self.latency.is_empty() {
            return Err("latency: at least one value".into());
        }
        if !(0.0..=1.0).contains(&self.errors) {
            return Err(format!(
                "errors: {} is not a probability in 0..=1",
                self.errors
            ));
        }
        Ok(())
    }
}

/// An upstream's model with its run state: the latency position and the error draws.
pub(crate) struct SimUpstream {
    pub name: String,
    model: UpstreamModel,
    state: RefCell<(usize, SplitMix64)>,
}

/// What one attempt meets: the result and how long it takes to arrive.
pub(crate) struct Answer {
    pub result: AttemptResult,
    pub after: Duration,
}

impl SimUpstream {
    pub(crate) fn new(name: &str, model: UpstreamModel, seed: u64) -> SimUpstream {
        // Each upstream draws from its own stream: adding one leaves the others' draws alone.
        let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        SimUpstream {
            name: name.to_owned(),
            model,
            state: RefCell::new((0, SplitMix64::new(seed ^ h))),
        }
    }

    /// An attempt started at `now` with `per_try` to get its response head.
    pub(crate) fn attempt(&self, now: Nanos, per_try: Duration) -> Answer {
        if self.model.outages.iter().any(|&(a, b)| a <= now && now < b) {
            // Refused at once.
            return Answer {
                result: AttemptResult::ConnectFailure,
                after: Duration::ZERO,
            };
        }
        let mut st = self.state.borrow_mut();
        let lat = self.model.latency[st.0 % self.model.latency.len()];
        st.0 = st.0.wrapping_add(1);
        // 53 random bits as a uniform value in [0, 1).
        let u = (st.1.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        if lat > per_try {
            return Answer {
                result: AttemptResult::PerTryTimeout,
                after: per_try,
            };
        }
        let status = if u < self.model.errors { 503 } else { 200 };
        Answer {
            result: AttemptResult::Response { status },
            after: lat,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::upstream::{SimUpstream, UpstreamModel};
    use std::time::Duration;
    use weir_core::Nanos;
    use weir_policy::AttemptResult;

    #[test]
    fn parses_specs_and_names_the_bad_part() {
        let m =
            UpstreamModel::parse("latency:20ms,errors:0.01,outage:10s-20s,outage:1m-2m").unwrap();
        assert_eq!(m.latency, [Duration::from_millis(20)]);
        assert_eq!(m.errors, 0.01);
        assert_eq!(m.outages.len(), 2);
        assert_eq!(m.outages[0], (Nanos::from_secs(10), Nanos::from_secs(20)));
        let seq = UpstreamModel::parse("latency:1ms|5ms").unwrap();
        assert_eq!(
            seq.latency,
            [Duration::from_millis(1), Duration::from_millis(5)]
        );
        assert_eq!(UpstreamModel::parse("").unwrap(), UpstreamModel::default());
        for (bad, msg) in [
            ("latency:20", "no unit"),
            ("errors:2", "probability"),
            ("outage:20s-10s", "after the start"),
            ("outage:10s", "START-END"),
            ("speed:1", "unknown key"),
            ("latency", "KEY:VALUE"),
        ] {
            let e = UpstreamModel::parse(bad).unwrap_err();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }

    #[test]
    fn outages_refuse_latency_cycles_and_slow_answers_time_out() {
        let m = UpstreamModel {
            latency: vec![Duration::from_millis(1), Duration::from_millis(300)],
            errors: 0.0,
            outages: vec![(Nanos::from_secs(5), Nanos::from_secs(6))],
        };
        let u = SimUpstream::new("a", m, 1);
        let per_try = Duration::from_millis(200);
        let a = u.attempt(Nanos::ZERO, per_try);
        assert_eq!(
            (a.result, a.after),
            (
                AttemptResult::Response { status: 200 },
                Duration::from_millis(1)
            )
        );
        let a = u.attempt(Nanos::ZERO, per_try);
        assert_eq!((a.result, a.after), (AttemptResult::PerTryTimeout, per_try));
        let a = u.attempt(Nanos::from_secs(5), per_try);
        assert_eq!(a.result, AttemptResult::ConnectFailure);
        let a = u.attempt(Nanos::from_secs(6), per_try);
        assert_eq!(a.result, AttemptResult::Response { status: 200 });
    }

    #[test]
    fn error_rate_is_seeded() {
        let m = UpstreamModel {
            errors: 0.25,
            ..UpstreamModel::default()
        };
        let run = |seed| {
            let u = SimUpstream::new("a", m.clone(), seed);
            (0..4000)
                .map(|_| u.attempt(Nanos::ZERO, Duration::from_secs(1)).result)
                .collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
        let errs = a
            .iter()
            .filter(|r| **r == AttemptResult::Response { status: 503 })
            .count();
        assert!((800..1200).contains(&errs), "{errs}");
    }
}
