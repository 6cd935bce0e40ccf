//! `[routes.breaker]`: the file model, the compiled policy, its compile step and the
//! mapping to the core's breaker parameters.

use crate::attempt::ResultSet;
use crate::check::{
    Ctx, R, at_least_1, core_err, file_table, fraction, nonzero_dur_or, result_set,
};
use crate::dur::Dur;
use serde::Serialize;
use std::time::Duration;
use weir_core::retry_budget::ratio_ppm_from_f64;
use weir_core::{BreakerConfig, Cooldown, Nanos, ParamError, SlowCall};

/// `[routes.breaker]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakerPolicy {
    /// Results counted as failures.
    pub failure_on: ResultSet,
    /// Trip after this many consecutive failures.
    pub consecutive_failures: Option<u32>,
    /// Trip when the failure rate in the window reaches this.
    pub failure_rate: Option<f64>,
    /// Calls in the rate window.
    pub window: u32,
    /// Calls needed before a rate trips.
    pub min_calls: u32,
    /// A call slower than this is slow.
    pub slow_call: Option<Dur>,
    /// Trip when the slow-call rate reaches this.
    pub slow_call_rate: Option<f64>,
    /// First OPEN period.
    pub cooldown_base: Dur,
    /// Longest OPEN period.
    pub cooldown_max: Dur,
    /// Growth per failed recovery.
    pub cooldown_multiplier: f64,
    /// Relative jitter of the OPEN period.
    pub cooldown_jitter: f64,
    /// Probes admitted in HALF_OPEN.
    pub probes: u32,
    /// Successful probes needed to close.
    pub successes: u32,
    /// Gradual re-admission after closing.
    pub ramp: Dur,
}

file_table! {
    #[derive(Default)]
    RawBreaker {
        failure_on: Option<Vec<String>>,
        consecutive_failures: Option<u64>,
        failure_rate: Option<f64>,
        window: Option<u64>,
        min_calls: Option<u64>,
        slow_call: Option<Dur>,
        slow_call_rate: Option<f64>,
        cooldown: Option<RawCooldown>,
        half_open: Option<RawHalfOpen>,
        ramp: Option<Dur>,
    }
}

file_table! {
    #[derive(Default)]
    RawCooldown {
        base: Option<Dur>,
        max: Option<Dur>,
        multiplier: Option<f64>,
        jitter: Option<f64>,
    }
}

file_table! {
    #[derive(Default)]
    RawHalfOpen {
        probes: Option<u64>,
        successes: Option<u64>,
    }
}

/// How long a HALF_OPEN episode may stay undecided before it counts as a failed
/// recovery: generous (sparse traffic may need a while to send `successes` probes), and
/// never shorter than twice the route's total timeout. Probe tickets are always recorded
/// or cancelled by the flow, so this only matters for a frontend that leaks a flow.
pub(crate) fn probe_timeout(total: Nanos) -> Nanos {
    Nanos::from_secs(60).max(total.saturating_mul(2))
}

/// The core breaker parameters of a `[routes.breaker]` section.
pub(crate) fn breaker_config(p: &BreakerPolicy, total: Nanos) -> Result<BreakerConfig, ParamError> {
    let mult = p.cooldown_multiplier * 1000.0;
    if !(mult.is_finite() && (1000.0..=1_000_000.0).contains(&mult)) {
        return Err(ParamError::OutOfRange("cooldown.multiplier"));
    }
    let cfg = BreakerConfig {
        consecutive_failures: p.consecutive_failures,
        failure_rate_ppm: p
            .failure_rate
            .map(ppm)
            .transpose()
            .map_err(|_| ParamError::OutOfRange("failure_rate"))?,
        slow_call: match (p.slow_call, p.slow_call_rate) {
            (Some(t), Some(r)) => Some(SlowCall {
                threshold: t.0.into(),
                rate_ppm: ppm(r).map_err(|_| ParamError::OutOfRange("slow_call_rate"))?,
            }),
            _ => None,
        },
        window: p.window,
        min_calls: p.min_calls,
        cooldown: Cooldown {
            base: p.cooldown_base.0.into(),
            max: p.cooldown_max.0.into(),
            multiplier_milli: mult.round() as u32,
            jitter_ppm: ppm(p.cooldown_jitter)
                .map_err(|_| ParamError::OutOfRange("cooldown.jitter"))?,
        },
        probes: p.probes,
        successes: p.successes,
        ramp: p.ramp.0.into(),
        probe_timeout: probe_timeout(total),
    };
    cfg.validate()?;
    Ok(cfg)
}

fn ppm(f: f64) -> Result<u32, ParamError> {
    ratio_ppm_from_f64(f).ok_or(ParamError::OutOfRange("rate"))
}

fn breaker_key(f: &'static str) -> String {
    match f {
        "probes" | "successes" => format!("half_open.{f}"),
        "cooldown.base" | "cooldown.max" | "cooldown.multiplier" | "cooldown.jitter" => {
            f.to_string()
        }
        other => other.to_string(),
    }
}

/// The compile step at key prefix `k`; `total` is the route's total timeout (the core
/// config's probe timeout depends on it, so the core's own checks run here too).
pub(crate) fn compile(k: &str, b: RawBreaker, total: Dur, ctx: &Ctx<'_>) -> R<BreakerPolicy> {
    let p = compile_policy(k, b, ctx)?;
    breaker_config(&p, total.nanos()).map_err(|e| core_err(ctx, k, e, breaker_key))?;
    Ok(p)
}

fn compile_policy(k: &str, b: RawBreaker, ctx: &Ctx<'_>) -> R<BreakerPolicy> {
    let failure_on = result_set(
        ctx,
        &format!("{k}.failure_on"),
        b.failure_on,
        &["5xx", "connect_failure", "timeout"],
        (
            "failure kind",
            "5xx, connect_failure, timeout, reset, protocol_error or a status code",
        ),
    )?;
    let u32_of = |key: &str, v: u64| -> R<u32> {
        let v = at_least_1(ctx, &format!("{k}.{key}"), v)?;
        u32::try_from(v).map_err(|_| ctx.err(format!("{k}.{key}"), "too large"))
    };
    let consecutive_failures = b
        .consecutive_failures
        .map(|v| u32_of("consecutive_failures", v))
        .transpose()?;
    let failure_rate = b
        .failure_rate
        .map(|v| fraction(ctx, &format!("{k}.failure_rate"), v, false))
        .transpose()?;
    let slow_call_rate = b
        .slow_call_rate
        .map(|v| fraction(ctx, &format!("{k}.slow_call_rate"), v, false))
        .transpose()?;
    if slow_call_rate.is_some() != b.slow_call.is_some() {
        return Err(ctx.err_at_either(
            k,
            ("slow_call_rate", b.slow_call.is_some()),
            "slow_call",
            "slow_call and slow_call_rate go together",
        ));
    }
    if consecutive_failures.is_none() && failure_rate.is_none() && slow_call_rate.is_none() {
        return Err(ctx.err(
            k.to_string(),
            "needs a trip condition: consecutive_failures, failure_rate or slow_call_rate",
        ));
    }
    let window = u32_of("window", b.window.unwrap_or(20))?;
    let min_calls = u32_of("min_calls", b.min_calls.unwrap_or(10))?;
    if min_calls > window {
        return Err(ctx.err(
            format!("{k}.min_calls"),
            format!("must not exceed window ({window})"),
        ));
    }
    let c = b.cooldown.unwrap_or_default();
    let cooldown_base = nonzero_dur_or(
        ctx,
        &format!("{k}.cooldown.base"),
        c.base,
        Dur(Duration::from_secs(5)),
    )?;
    let cooldown_max = c
        .max
        .unwrap_or(Dur(Duration::from_secs(60)).max(cooldown_base));
    if cooldown_max < cooldown_base {
        return Err(ctx.err(
            format!("{k}.cooldown.max"),
            format!("must not be below base ({cooldown_base})"),
        ));
    }
    let cooldown_multiplier = c.multiplier.unwrap_or(2.0);
    if !(cooldown_multiplier.is_finite() && cooldown_multiplier >= 1.0) {
        return Err(ctx.err(format!("{k}.cooldown.multiplier"), "must be at least 1.0"));
    }
    let cooldown_jitter = fraction(
        ctx,
        &format!("{k}.cooldown.jitter"),
        c.jitter.unwrap_or(0.2),
        true,
    )?;
    let h = b.half_open.unwrap_or_default();
    let probes = u32_of("half_open.probes", h.probes.unwrap_or(1))?;
    let successes = u32_of("half_open.successes", h.successes.unwrap_or(probes as u64))?;
    if successes > probes {
        return Err(ctx.err(
            format!("{k}.half_open.successes"),
            format!("must not exceed probes ({probes})"),
        ));
    }
    Ok(BreakerPolicy {
        failure_on,
        consecutive_failures,
        failure_rate,
        window,
        min_calls,
        slow_call: b.slow_call,
        slow_call_rate,
        cooldown_base,
        cooldown_max,
        cooldown_multiplier,
        cooldown_jitter,
        probes,
        successes,
        ramp: b.ramp.unwrap_or(Dur(Duration::ZERO)),
    })
}

/// What `--check` prints for a breaker.
pub(crate) fn describe(b: &BreakerPolicy) -> String {
    let mut trips = Vec::new();
    if let Some(n) = b.consecutive_failures {
        trips.push(format!("{n} consecutive failures"));
    }
    if let Some(fr) = b.failure_rate {
        trips.push(format!(
            "failure rate {fr} over {} calls (min {})",
            b.window, b.min_calls
        ));
    }
    if let (Some(sc), Some(sr)) = (b.slow_call, b.slow_call_rate) {
        trips.push(format!("slow-call rate {sr} (slower than {sc})"));
    }
    format!(
        "failure_on [{}]; trips on {}; cooldown {}..{} x{} jitter {}; half_open {} probes / {} successes; ramp {}",
        b.failure_on.names.join(", "),
        trips.join(" or "),
        b.cooldown_base,
        b.cooldown_max,
        b.cooldown_multiplier,
        b.cooldown_jitter,
        b.probes,
        b.successes,
        b.ramp
    )
}
