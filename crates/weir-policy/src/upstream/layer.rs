//! `balance` and `[upstreams.outlier]`: the file model, the compiled policy, its compile
//! step (every key checked, errors naming file, line and key) and the mapping to the
//! core's [`OutlierConfig`].

use crate::check::{Ctx, R, at_least_1, core_err, file_table, fraction, nonzero_dur_or};
use crate::dur::Dur;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;
use weir_core::OutlierConfig;
use weir_core::outlier::{CONSECUTIVE_MAX, MIN_REQUESTS_MAX};
use weir_core::retry_budget::ratio_ppm_from_f64;

/// One `[[upstreams]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpstreamSettings {
    /// Name routes refer to.
    pub name: String,
    /// Endpoints.
    pub endpoints: Vec<SocketAddr>,
    /// `balance` (default `round_robin`).
    pub balance: Balance,
    /// `[upstreams.outlier]`: passive ejection (`None`: nothing is ejected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outlier: Option<OutlierPolicy>,
    /// `connect_timeout_ms` (default 1000).
    #[serde(serialize_with = "crate::dur::ser_duration")]
    pub connect_timeout: Duration,
}

/// `balance`: how an attempt's endpoint is chosen among those in rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// In turn (the default).
    #[default]
    RoundRobin,
    /// Two random choices; the one with fewer attempts in flight (over every worker) wins.
    LeastRequest,
}

impl Balance {
    fn as_str(self) -> &'static str {
        match self {
            Balance::RoundRobin => "round_robin",
            Balance::LeastRequest => "least_request",
        }
    }
}

/// `[upstreams.outlier]` after defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutlierPolicy {
    /// Gateway-side failures in a row that eject.
    pub consecutive_failures: u32,
    /// 5xx responses in a row that eject (`None`: not used).
    pub consecutive_5xx: Option<u32>,
    /// Failed share of an interval's attempts that ejects (`None`: not used).
    pub failure_percentage: Option<f64>,
    /// Attempts an interval needs before its failed share counts.
    pub min_requests: u32,
    /// The failed share's interval.
    pub interval: Dur,
    /// First ejection's length (the n-th lasts n × this).
    pub base_ejection: Dur,
    /// Longest ejection.
    pub max_ejection: Dur,
    /// Relative jitter of an ejection (fraction).
    pub jitter: f64,
    /// Most endpoints ejected at once, percent.
    pub max_ejection_percent: u32,
    /// Healthy share (percent) below which every endpoint is used.
    pub panic_threshold: u32,
    /// The core machine's parameters.
    #[serde(skip)]
    pub(crate) core: OutlierConfig,
}

file_table! {
    #[derive(Default)]
    RawOutlier {
        consecutive_failures: Option<u64>,
        consecutive_5xx: Option<u64>,
        failure_percentage: Option<f64>,
        min_requests: Option<u64>,
        interval: Option<Dur>,
        base_ejection: Option<Dur>,
        max_ejection: Option<Dur>,
        jitter: Option<f64>,
        max_ejection_percent: Option<u64>,
        panic_threshold: Option<u64>,
    }
}

fn bounded(ctx: &Ctx<'_>, key: &str, v: u64, max: u32) -> R<u32> {
    let v = at_least_1(ctx, key, v)?;
    u32::try_from(v)
        .ok()
        .filter(|v| *v <= max)
        .ok_or_else(|| ctx.err(key, format!("out of range (at most {max})")))
}

fn percent(ctx: &Ctx<'_>, key: &str, v: u64) -> R<u32> {
    u32::try_from(v)
        .ok()
        .filter(|v| *v <= 100)
        .ok_or_else(|| ctx.err(key, "must be a percentage between 0 and 100"))
}

/// The compile step at key prefix `k` (`upstreams[0].outlier`).
pub(crate) fn compile(k: &str, o: RawOutlier, ctx: &Ctx<'_>) -> R<OutlierPolicy> {
    let key = |f: &str| format!("{k}.{f}");
    let count = |f: &str, v: u64, max: u32| bounded(ctx, &key(f), v, max);
    let consecutive_failures = count(
        "consecutive_failures",
        o.consecutive_failures.unwrap_or(5),
        CONSECUTIVE_MAX,
    )?;
    let consecutive_5xx = o
        .consecutive_5xx
        .map(|v| count("consecutive_5xx", v, CONSECUTIVE_MAX))
        .transpose()?;
    let failure_percentage = o
        .failure_percentage
        .map(|v| fraction(ctx, &key("failure_percentage"), v, true))
        .transpose()?;
    let min_requests = count(
        "min_requests",
        o.min_requests.unwrap_or(20),
        MIN_REQUESTS_MAX,
    )?;
    let secs = |s| Dur(Duration::from_secs(s));
    let interval = nonzero_dur_or(ctx, &key("interval"), o.interval, secs(10))?;
    let base_ejection = nonzero_dur_or(ctx, &key("base_ejection"), o.base_ejection, secs(30))?;
    let max_ejection = nonzero_dur_or(ctx, &key("max_ejection"), o.max_ejection, secs(300))?;
    if max_ejection < base_ejection {
        return Err(ctx.err(
            key("max_ejection"),
            format!("max_ejection ({max_ejection}) must not be less than base_ejection ({base_ejection})"),
        ));
    }
    let jitter = fraction(ctx, &key("jitter"), o.jitter.unwrap_or(0.0), true)?;
    let max_ejection_percent = percent(
        ctx,
        &key("max_ejection_percent"),
        o.max_ejection_percent.unwrap_or(10),
    )?;
    let panic_threshold = percent(
        ctx,
        &key("panic_threshold"),
        o.panic_threshold.unwrap_or(50),
    )?;
    let ppm = |f: f64| ratio_ppm_from_f64(f).unwrap_or(1_000_000).min(1_000_000);
    let core = OutlierConfig {
        consecutive_failures: Some(consecutive_failures),
        consecutive_5xx,
        failure_ppm: failure_percentage.map(ppm),
        min_requests,
        interval: interval.nanos(),
        base_ejection: base_ejection.nanos(),
        max_ejection: max_ejection.nanos(),
        jitter_ppm: ppm(jitter),
        max_ejection_percent,
        panic_threshold,
    };
    core.validate()
        .map_err(|e| core_err(ctx, k, e, |f| f.to_string()))?;
    Ok(OutlierPolicy {
        consecutive_failures,
        consecutive_5xx,
        failure_percentage,
        min_requests,
        interval,
        base_ejection,
        max_ejection,
        jitter,
        max_ejection_percent,
        panic_threshold,
        core,
    })
}

/// What `--check` prints for an upstream's balancing and ejection.
pub(crate) fn describe(balance: Balance, o: Option<&OutlierPolicy>) -> String {
    let Some(o) = o else {
        return format!("balance {}, no outlier ejection", balance.as_str());
    };
    let off = |v: Option<String>| v.unwrap_or_else(|| "off".to_string());
    format!(
        "balance {}, outlier: consecutive_failures {}, consecutive_5xx {}, \
         failure_percentage {} (min_requests {} per {}), ejection {} x n up to {} (jitter {}), \
         max_ejection_percent {}, panic_threshold {}",
        balance.as_str(),
        o.consecutive_failures,
        off(o.consecutive_5xx.map(|v| v.to_string())),
        off(o.failure_percentage.map(|v| v.to_string())),
        o.min_requests,
        o.interval,
        o.base_ejection,
        o.max_ejection,
        o.jitter,
        o.max_ejection_percent,
        o.panic_threshold
    )
}
