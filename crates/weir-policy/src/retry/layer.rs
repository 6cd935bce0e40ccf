//! `[routes.retry]`: the file model, the compiled policy, its compile step and the
//! mapping to the core's backoff and retry budget.

use crate::attempt::ResultSet;
use crate::check::{
    Ctx, R, at_least_1, core_err, file_table, is_token, method_list, nonzero_dur_or, result_set,
};
use crate::dur::Dur;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::time::Duration;
use weir_core::retry_budget::ratio_ppm_from_f64;
use weir_core::{Backoff, Jitter, ParamError};

/// `[routes.retry]` (a route without it has `max_attempts = 1`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetryPolicy {
    /// Attempts including the first.
    pub max_attempts: u32,
    /// Retryable results.
    pub on: ResultSet,
    /// A non-empty header of this name makes any method retryable (lowercase).
    pub idempotency_header: String,
    /// Methods retried without an idempotency key.
    pub methods: Vec<String>,
    /// Backoff between attempts.
    pub backoff: BackoffPolicy,
    /// Retry budget.
    pub budget: BudgetPolicy,
    /// Larger (or chunked) request bodies are never retried (default 65536).
    pub max_replay_bytes: u64,
}

/// `backoff = { base, max, jitter }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BackoffPolicy {
    /// First retry's delay.
    pub base: Dur,
    /// Cap.
    pub max: Dur,
    /// Jitter kind.
    #[serde(serialize_with = "ser_jitter")]
    pub jitter: Jitter,
}

/// `budget = { ratio, min_per_sec, ttl }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BudgetPolicy {
    /// Retries per request.
    pub ratio: f64,
    /// Reserve of retries per second.
    pub min_per_sec: u64,
    /// How long a deposit counts.
    pub ttl: Dur,
}

file_table! {
    #[derive(Default)]
    RawRetry {
        max_attempts: Option<u64>,
        on: Option<Vec<String>>,
        idempotency_header: Option<String>,
        methods: Option<Vec<String>>,
        backoff: Option<RawBackoff>,
        budget: Option<RawBudget>,
        max_replay_bytes: Option<u64>,
    }
}

file_table! {
    #[derive(Default)]
    RawBackoff {
        base: Option<Dur>,
        max: Option<Dur>,
        #[serde(default, deserialize_with = "de_jitter")]
        jitter: Option<Jitter>,
    }
}

file_table! {
    #[derive(Default)]
    RawBudget {
        ratio: Option<f64>,
        min_per_sec: Option<u64>,
        ttl: Option<Dur>,
    }
}

/// The file's `jitter = "..."`, with serde's own error for an unknown name.
fn de_jitter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Jitter>, D::Error> {
    const NAMES: [&str; 4] = ["none", "full", "equal", "decorrelated"];
    let s = String::deserialize(d)?;
    Jitter::parse(&s)
        .map(Some)
        .ok_or_else(|| serde::de::Error::unknown_variant(&s, &NAMES))
}

fn ser_jitter<S: Serializer>(j: &Jitter, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(j.as_str())
}

/// The core retry-budget parameters of `budget = {...}`.
pub(crate) fn budget_config(p: &BudgetPolicy) -> Result<weir_core::RetryBudgetConfig, ParamError> {
    let ratio = ratio_ppm_from_f64(p.ratio).ok_or(ParamError::OutOfRange("ratio"))?;
    let min = u32::try_from(p.min_per_sec).map_err(|_| ParamError::OutOfRange("min_per_sec"))?;
    weir_core::RetryBudgetConfig::new(ratio, min, p.ttl.0.into())
}

/// The core backoff of `backoff = {...}` (doubling; the config has no multiplier).
pub(crate) fn backoff(p: &BackoffPolicy) -> Result<Backoff, ParamError> {
    Backoff::exponential(p.base.nanos(), p.max.nanos(), p.jitter)
}

/// The compile step at key prefix `k` (a route without `[routes.retry]` gets one attempt).
pub(crate) fn compile(k: &str, r: Option<RawRetry>, ctx: &Ctx<'_>) -> R<RetryPolicy> {
    let present = r.is_some();
    let r = r.unwrap_or_default();
    let max_attempts = match r.max_attempts {
        Some(n) => at_least_1(ctx, &format!("{k}.max_attempts"), n)?,
        None if present => 2,
        None => 1,
    };
    let max_attempts = u32::try_from(max_attempts)
        .map_err(|_| ctx.err(format!("{k}.max_attempts"), "too large"))?;
    let on = result_set(
        ctx,
        &format!("{k}.on"),
        r.on,
        &[
            "connect_failure",
            "reset",
            "protocol_error",
            "per_try_timeout",
            "502",
            "503",
            "504",
        ],
        (
            "retry condition",
            "connect_failure, reset, protocol_error, per_try_timeout, 5xx or a status code",
        ),
    )?;
    let idempotency_header = r
        .idempotency_header
        .unwrap_or_else(|| "idempotency-key".to_string());
    if !is_token(&idempotency_header) {
        return Err(ctx.err(
            format!("{k}.idempotency_header"),
            "must be a valid header name",
        ));
    }
    let methods = method_list(
        ctx,
        &format!("{k}.methods"),
        &r.methods
            .unwrap_or_else(|| ["GET", "HEAD", "OPTIONS"].map(String::from).to_vec()),
    )?;
    let b = r.backoff.unwrap_or_default();
    let backoff = BackoffPolicy {
        base: b.base.unwrap_or(Dur(Duration::from_millis(25))),
        max: b.max.unwrap_or(Dur(Duration::from_millis(250))),
        jitter: b.jitter.unwrap_or(Jitter::Full),
    };
    if backoff.max < backoff.base {
        return Err(ctx.err(
            format!("{k}.backoff.max"),
            format!("must not be below base ({})", backoff.base),
        ));
    }
    // Both frontends hold at most 64 KiB of a request body for a retry (the gateway's replay
    // buffer, Pingora's retry buffer); a larger value would silently do nothing.
    let replay = r.max_replay_bytes.unwrap_or(MAX_REPLAY_BYTES);
    if replay > MAX_REPLAY_BYTES {
        return Err(ctx.err(
            format!("{k}.max_replay_bytes"),
            format!(
                "at most {MAX_REPLAY_BYTES} (64 KiB: the largest body either frontend holds for a retry); \
                 a longer body is streamed and its request is not retried"
            ),
        ));
    }
    let bu = r.budget.unwrap_or_default();
    let ratio = bu.ratio.unwrap_or(0.2);
    if !(ratio.is_finite() && (0.0..=1000.0).contains(&ratio)) {
        return Err(ctx.err(
            format!("{k}.budget.ratio"),
            "must be a number from 0 to 1000 (retries per request, e.g. 0.2)",
        ));
    }
    let budget = BudgetPolicy {
        ratio,
        min_per_sec: bu.min_per_sec.unwrap_or(10),
        ttl: nonzero_dur_or(
            ctx,
            &format!("{k}.budget.ttl"),
            bu.ttl,
            Dur(Duration::from_secs(10)),
        )?,
    };
    self::backoff(&backoff)
        .map_err(|e| core_err(ctx, &format!("{k}.backoff"), e, |f| f.to_string()))?;
    budget_config(&budget)
        .map_err(|e| core_err(ctx, &format!("{k}.budget"), e, |f| f.to_string()))?;
    Ok(RetryPolicy {
        max_attempts,
        on,
        idempotency_header: idempotency_header.to_ascii_lowercase(),
        methods,
        backoff,
        budget,
        max_replay_bytes: replay,
    })
}

/// The largest `max_replay_bytes` (and its default): 64 KiB.
pub(crate) const MAX_REPLAY_BYTES: u64 = 64 * 1024;

/// What `--check` prints for a retry policy.
pub(crate) fn describe(rt: &RetryPolicy) -> String {
    if rt.max_attempts <= 1 {
        return "none (1 attempt)".to_string();
    }
    format!(
        "{} attempts on [{}]; idempotent: {} or header {}; backoff {}..{} jitter {:?}; budget ratio {} + {}/s over {}; max_replay_bytes {}",
        rt.max_attempts,
        rt.on.names.join(", "),
        rt.methods.join("|"),
        rt.idempotency_header,
        rt.backoff.base,
        rt.backoff.max,
        rt.backoff.jitter,
        rt.budget.ratio,
        rt.budget.min_per_sec,
        rt.budget.ttl,
        rt.max_replay_bytes
    )
}
