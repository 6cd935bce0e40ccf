//! The file model: exactly what `gateway.toml` may contain, nothing more
//! (`deny_unknown_fields` everywhere). Defaults and cross-checks are applied by
//! [`super::compile`], not here, so every error can name the key it is about.

use core::fmt;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A duration written with a unit: `"250ms"`, `"2s"`, `"1m"`, `"1h"` (also `"us"`, `"ns"`).
/// A bare number (or a string without a unit) is an error: `timeout = 5` is ambiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl Dur {
    /// Parses `"<integer><unit>"`.
    pub fn parse(s: &str) -> Result<Dur, String> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        if num.is_empty() {
            return Err(format!(
                "invalid duration {s:?}: expected a whole number and a unit, e.g. \"250ms\", \"2s\", \"1m\", \"1h\""
            ));
        }
        let n: u64 = num
            .parse()
            .map_err(|_| format!("invalid duration {s:?}: number too large"))?;
        let d = match unit {
            "ns" => Duration::from_nanos(n),
            "us" | "µs" => Duration::from_micros(n),
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "" => {
                return Err(format!(
                    "duration {s:?} has no unit: write e.g. \"{n}ms\" or \"{n}s\""
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration {s:?}: unknown unit {other:?} (use ms, s, m or h)"
                ));
            }
        };
        Ok(Dur(d))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_duration(self.0, f)
    }
}

/// Formats a duration in the largest unit that represents it exactly (`"1500ms"`, `"2s"`).
pub(crate) fn fmt_duration(d: Duration, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let ns = d.as_nanos();
    const UNITS: [(u128, &str); 6] = [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    if ns == 0 {
        return f.write_str("0s");
    }
    for (size, unit) in UNITS {
        if ns.is_multiple_of(size) {
            return write!(f, "{}{}", ns / size, unit);
        }
    }
    write!(f, "{ns}ns")
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string with a unit, e.g. \"250ms\", \"2s\", \"1m\", \"1h\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                Dur::parse(v).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "duration {v} has no unit: write e.g. \"{v}ms\" or \"{v}s\""
                )))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                self.visit_i64(v as i64)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "duration {v} has no unit: write a whole number with a unit, e.g. \"250ms\""
                )))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub server: Option<RawServer>,
    pub store: Option<RawStore>,
    pub log: Option<RawLog>,
    #[serde(default)]
    pub upstreams: Vec<RawUpstream>,
    #[serde(default)]
    pub routes: Vec<RawRoute>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    pub listen: Option<String>,
    pub admin: Option<String>,
    pub instance: Option<String>,
    pub workers: Option<usize>,
    pub max_header_bytes: Option<usize>,
    pub header_timeout: Option<Dur>,
    pub idle_timeout: Option<Dur>,
    pub max_connections: Option<usize>,
    pub drain_timeout: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStore {
    pub kind: StoreKindRaw,
    pub url: String,
    pub timeout_ms: Option<u64>,
    pub lease: Option<u64>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StoreKindRaw {
    Redis,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLog {
    pub access: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUpstream {
    pub name: String,
    pub endpoints: Vec<String>,
    pub connect_timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub id: String,
    #[serde(rename = "match")]
    pub match_: RawMatch,
    pub upstream: String,
    pub rate_limit: Option<RawRateLimit>,
    pub concurrency: Option<RawConcurrency>,
    pub timeouts: Option<RawTimeouts>,
    pub retry: Option<RawRetry>,
    pub breaker: Option<RawBreaker>,
    pub fallback: Option<RawFallback>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMatch {
    pub path_prefix: String,
    pub methods: Option<Vec<String>>,
}

/// The limiting algorithm of a route.
#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum AlgorithmKind {
    /// GCRA token bucket: `rate` per `per`, `burst`.
    TokenBucket,
    /// nginx `limit_req`: `rate` per `per`, `burst` excess, `delay` or `nodelay`.
    LeakyBucket,
    /// `limit` per fixed `window`.
    FixedWindow,
    /// Weighted two-bucket sliding window counter: `limit` per `window`.
    SlidingWindow,
    /// Exact sliding log: `limit` per `window`.
    SlidingLog,
}

/// Where rate-limit state lives.
#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Per gateway process (all workers share one state).
    Local,
    /// In the shared [`crate::GlobalStore`] (Redis).
    Global,
}

/// What a global route does when its store cannot answer in time.
#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum OnStoreError {
    /// Fail closed: 503 `ratelimit_store_unavailable`, no upstream attempt.
    Deny,
    /// Fail open: proxy, mark `x-weir-ratelimit: bypassed`, count it.
    Allow,
}

/// Enforce or only observe.
#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Reject what the policy rejects.
    Enforce,
    /// Count and log would-be rejections, reject nothing.
    Shadow,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRateLimit {
    pub algorithm: AlgorithmKind,
    pub rate: Option<u64>,
    pub per: Option<Dur>,
    pub burst: Option<u64>,
    pub delay: Option<u64>,
    pub nodelay: Option<bool>,
    pub limit: Option<u64>,
    pub window: Option<Dur>,
    pub key: Option<Vec<String>>,
    pub deny_empty_key: Option<bool>,
    pub scope: Option<Scope>,
    pub on_store_error: Option<OnStoreError>,
    pub mode: Option<Mode>,
    pub max_keys: Option<u64>,
    pub max_key_bytes: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConcurrency {
    pub max: u64,
    pub queue: Option<u64>,
    pub queue_timeout: Option<Dur>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTimeouts {
    pub total: Option<Dur>,
    pub per_try: Option<Dur>,
    pub min_try: Option<Dur>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRetry {
    pub max_attempts: Option<u64>,
    pub on: Option<Vec<String>>,
    pub idempotency_header: Option<String>,
    pub methods: Option<Vec<String>>,
    pub backoff: Option<RawBackoff>,
    pub budget: Option<RawBudget>,
    pub max_replay_bytes: Option<u64>,
}

/// Backoff jitter.
#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Jitter {
    /// Exactly the exponential delay.
    None,
    /// Uniform in `[0, delay]`.
    Full,
    /// `delay/2` plus uniform in `[0, delay/2]`.
    Equal,
    /// Uniform in `[base, 3 × previous]`, capped.
    Decorrelated,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBackoff {
    pub base: Option<Dur>,
    pub max: Option<Dur>,
    pub jitter: Option<Jitter>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBudget {
    pub ratio: Option<f64>,
    pub min_per_sec: Option<u64>,
    pub ttl: Option<Dur>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBreaker {
    pub failure_on: Option<Vec<String>>,
    pub consecutive_failures: Option<u64>,
    pub failure_rate: Option<f64>,
    pub window: Option<u64>,
    pub min_calls: Option<u64>,
    pub slow_call: Option<Dur>,
    pub slow_call_rate: Option<f64>,
    pub cooldown: Option<RawCooldown>,
    pub half_open: Option<RawHalfOpen>,
    pub ramp: Option<Dur>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCooldown {
    pub base: Option<Dur>,
    pub max: Option<Dur>,
    pub multiplier: Option<f64>,
    pub jitter: Option<f64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHalfOpen {
    pub probes: Option<u64>,
    pub successes: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFallback {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(Dur::parse("250ms").unwrap().0, Duration::from_millis(250));
        assert_eq!(Dur::parse("2s").unwrap().0, Duration::from_secs(2));
        assert_eq!(Dur::parse("1m").unwrap().0, Duration::from_secs(60));
        assert_eq!(Dur::parse("1h").unwrap().0, Duration::from_secs(3600));
        assert!(Dur::parse("5").unwrap_err().contains("no unit"));
        assert!(Dur::parse("ms").is_err());
        assert!(Dur::parse("5 parsecs").is_err());
        assert_eq!(Dur(Duration::from_millis(1500)).to_string(), "1500ms");
        assert_eq!(Dur(Duration::from_secs(120)).to_string(), "2m");
        assert_eq!(Dur(Duration::ZERO).to_string(), "0s");
    }
}
