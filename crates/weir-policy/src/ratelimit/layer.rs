//! `[routes.rate_limit]`: the file model, the compiled policy and its compile step.
//!
//! The compile step produces the route's one [`Limit`] (the core's validated config of its
//! algorithm); every later consumer — the keyed local table, the global store request, the
//! `RateLimit-Policy` header, `/admin/config` — reads that same value.

use crate::check::{Ctx, R, at_least_1, core_err, file_table, nonzero_dur, nonzero_dur_or};
use crate::dur::{Dur, secs_ceil};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::time::Duration;
use weir_core::{Limit, LimitKind, MAX_SLIDING_LOG_LIMIT};

/// `allow_for` when the file is silent: one outage is bypassed for at most 5 minutes.
pub(crate) const DEFAULT_ALLOW_FOR: Duration = Duration::from_secs(300);

/// Enforce or only observe.
#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Reject what the policy rejects.
    Enforce,
    /// Count and log would-be rejections, reject nothing.
    Shadow,
}

// The descriptor's parts and the store's settings are shared with the quota: they live in
// the leaves (descriptor.rs, store.rs), and are named here too for the quota's imports.
pub use crate::descriptor::KeyPart;
pub(crate) use crate::descriptor::key_parts;
pub use crate::store::{OnStoreError, Scope};

/// `[routes.rate_limit]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateLimitPolicy {
    /// The algorithm and its numbers (serialized as `algorithm = "..."` and its keys).
    #[serde(flatten, serialize_with = "ser_limit")]
    pub limit: Limit,
    /// Descriptor parts.
    pub key: Vec<KeyPart>,
    /// Missing part → 403 `empty_key` (else the part counts as an empty string).
    pub deny_empty_key: bool,
    /// Local or global state.
    pub scope: Scope,
    /// Global scope: deny or allow when the store fails.
    pub on_store_error: OnStoreError,
    /// `on_store_error = "allow"`: how long one store outage may be bypassed (default
    /// 5m); after that the shard's keys are answered fail-closed until the store answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_for: Option<Dur>,
    /// Enforce or shadow.
    pub mode: Mode,
    /// Bound on local keyed state.
    pub max_keys: u64,
    /// Longest key part in bytes (→ 400 `key_too_long`).
    pub max_key_bytes: u64,
    /// `headers` (default true): the `RateLimit-Policy` and `RateLimit` fields on responses.
    /// Off, they are left out; `Retry-After` is still sent on every 429.
    pub headers: bool,
}

impl crate::descriptor::KeyRules for RateLimitPolicy {
    fn parts(&self) -> &[KeyPart] {
        &self.key
    }
    fn deny_empty_key(&self) -> bool {
        self.deny_empty_key
    }
    fn max_key_bytes(&self) -> u64 {
        self.max_key_bytes
    }
}

impl RateLimitPolicy {
    /// `(Q, W)` of the `RateLimit-Policy` field: quota and window in whole seconds (≥ 1).
    pub fn quota_window(&self) -> (u64, u64) {
        let (q, w) = self.limit.quota_window();
        (q, secs_ceil(w.into()).max(1))
    }
}

/// The config keys of a limit, as the file writes them.
enum Field {
    Count(&'static str, u64),
    Span(&'static str, Dur),
    Flag(&'static str, bool),
}

fn fields(l: &Limit) -> Vec<Field> {
    use Field::*;
    let d = |n: weir_core::Nanos| Dur(n.into());
    match l {
        Limit::TokenBucket(c) => vec![
            Count("rate", c.rate()),
            Span("per", d(c.per())),
            Count("burst", c.burst()),
        ],
        Limit::LeakyBucket(c) => vec![
            Count("rate", c.rate()),
            Span("per", d(c.per())),
            Count("burst", c.burst()),
            Count("delay", c.delay()),
            Flag("nodelay", c.nodelay()),
        ],
        Limit::FixedWindow(c) => vec![Count("limit", c.limit()), Span("window", d(c.window()))],
        Limit::SlidingWindow(c) => vec![Count("limit", c.limit()), Span("window", d(c.window()))],
        Limit::SlidingLog(c) => vec![Count("limit", c.limit()), Span("window", d(c.window()))],
    }
}

fn ser_limit<S: Serializer>(l: &Limit, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(None)?;
    m.serialize_entry("algorithm", l.kind().as_str())?;
    for f in fields(l) {
        match f {
            Field::Count(k, v) => m.serialize_entry(k, &v)?,
            Field::Span(k, v) => m.serialize_entry(k, &v)?,
            Field::Flag(k, v) => m.serialize_entry(k, &v)?,
        }
    }
    m.end()
}

/// What `--check` prints for a limit: `token_bucket 2 per 60s, burst 2`.
fn describe_limit(l: &Limit) -> String {
    let (q, w) = l.quota_window();
    let w = Dur(w.into());
    let kind = l.kind().as_str();
    match l {
        Limit::TokenBucket(c) => format!("{kind} {q} per {w}, burst {}", c.burst()),
        Limit::LeakyBucket(c) => format!(
            "{kind} {q} per {w}, burst {}, {}",
            c.burst(),
            if c.nodelay() {
                "nodelay".to_string()
            } else {
                format!("delay {}", c.delay())
            }
        ),
        _ => format!("{kind} {q} per {w}"),
    }
}

/// What `--check` prints for a rate limit.
pub(crate) fn describe(rl: &RateLimitPolicy) -> String {
    let key: Vec<String> = rl.key.iter().map(|k| k.to_string()).collect();
    format!(
        "{}; key [{}]{}; scope {:?}{}; mode {:?}; max_keys {}, max_key_bytes {}",
        describe_limit(&rl.limit),
        key.join(", "),
        if rl.deny_empty_key {
            ", empty key -> 403"
        } else {
            ""
        },
        rl.scope,
        if rl.scope == Scope::Global {
            format!(
                ", on_store_error {:?}{}",
                rl.on_store_error,
                rl.allow_for
                    .map(|d| format!(" for {d}"))
                    .unwrap_or_default()
            )
        } else {
            String::new()
        },
        rl.mode,
        rl.max_keys,
        rl.max_key_bytes
    )
}

/// The file's `algorithm = "..."`, with serde's own error for an unknown name.
fn de_kind<'de, D: Deserializer<'de>>(d: D) -> Result<LimitKind, D::Error> {
    let s = String::deserialize(d)?;
    LimitKind::parse(&s).ok_or_else(|| serde::de::Error::unknown_variant(&s, &LimitKind::NAMES))
}

file_table! {
    RawRateLimit {
        #[serde(deserialize_with = "de_kind")]
        algorithm: LimitKind,
        rate: Option<u64>,
        per: Option<Dur>,
        burst: Option<u64>,
        delay: Option<u64>,
        nodelay: Option<bool>,
        limit: Option<u64>,
        window: Option<Dur>,
        key: Option<Vec<String>>,
        deny_empty_key: Option<bool>,
        scope: Option<Scope>,
        on_store_error: Option<OnStoreError>,
        allow_for: Option<Dur>,
        mode: Option<Mode>,
        max_keys: Option<u64>,
        max_key_bytes: Option<u64>,
        headers: Option<bool>,
    }
}

/// The compile step of `[routes.rate_limit]` at key prefix `k`; `store_lease` is `[store]
/// lease` when the config has a store (`None`: no store, so no global scope).
pub(crate) fn compile(
    k: &str,
    rl: RawRateLimit,
    store_lease: Option<u64>,
    ctx: &Ctx<'_>,
) -> R<RateLimitPolicy> {
    let limit = compile_limit(k, &rl, ctx)?;
    let key = key_parts(ctx, k, rl.key)?;
    let scope = rl.scope.unwrap_or(Scope::Local);
    if scope == Scope::Global {
        let Some(lease) = store_lease else {
            return Err(ctx.err(
                format!("{k}.scope"),
                "scope = \"global\" needs a [store] section",
            ));
        };
        let size_key = if rl.rate.is_some() { "rate" } else { "limit" };
        crate::store::check_exact(&limit).map_err(|e| ctx.err(format!("{k}.{size_key}"), e))?;
        if lease > 0 && limit.kind() != LimitKind::TokenBucket {
            return Err(ctx.err(
                format!("{k}.algorithm"),
                format!(
                    "[store] lease = {} applies to token buckets only; a global {} asks the \
                     store on every request: set lease = 0 or use algorithm = \"token_bucket\"",
                    lease,
                    limit.kind().as_str()
                ),
            ));
        }
    }
    if scope == Scope::Local && rl.on_store_error.is_some() {
        return Err(ctx.err(
            format!("{k}.on_store_error"),
            "only applies to scope = \"global\"",
        ));
    }
    let on_store_error = rl.on_store_error.unwrap_or(OnStoreError::Deny);
    let allow_for = match (on_store_error, rl.allow_for) {
        (OnStoreError::Allow, d) => Some(nonzero_dur_or(
            ctx,
            &format!("{k}.allow_for"),
            d,
            Dur(DEFAULT_ALLOW_FOR),
        )?),
        (OnStoreError::Deny, None) => None,
        (OnStoreError::Deny, Some(_)) => {
            return Err(ctx.err(
                format!("{k}.allow_for"),
                "only applies to on_store_error = \"allow\"",
            ));
        }
    };
    let count = |name: &str, v: Option<u64>, default: u64| {
        at_least_1(ctx, &format!("{k}.{name}"), v.unwrap_or(default))
    };
    Ok(RateLimitPolicy {
        limit,
        key,
        deny_empty_key: rl.deny_empty_key.unwrap_or(true),
        scope,
        on_store_error,
        allow_for,
        mode: rl.mode.unwrap_or(Mode::Enforce),
        max_keys: count("max_keys", rl.max_keys, 100_000)?,
        max_key_bytes: count("max_key_bytes", rl.max_key_bytes, 256)?,
        headers: rl.headers.unwrap_or(true),
    })
}

/// The algorithm's keys → one validated [`Limit`] (defaults, cross-checks, the core's
/// constructor; its errors name the key).
fn compile_limit(k: &str, rl: &RawRateLimit, ctx: &Ctx<'_>) -> R<Limit> {
    let kind = rl.algorithm;
    let is_bucket = kind.is_bucket();
    // Keys that belong to the other family of algorithms are mistakes, not noise.
    let misplaced: &[(&str, bool)] = if is_bucket {
        &[
            ("limit", rl.limit.is_some()),
            ("window", rl.window.is_some()),
        ]
    } else {
        &[
            ("rate", rl.rate.is_some()),
            ("per", rl.per.is_some()),
            ("burst", rl.burst.is_some()),
            ("delay", rl.delay.is_some()),
            ("nodelay", rl.nodelay.is_some()),
        ]
    };
    if let Some((name, _)) = misplaced.iter().find(|(_, present)| *present) {
        return Err(ctx.err(
            format!("{k}.{name}"),
            format!(
                "not used by algorithm {:?} ({})",
                kind.as_str(),
                if is_bucket {
                    "buckets take rate, per, burst"
                } else {
                    "windows take limit and window"
                }
            ),
        ));
    }
    if kind == LimitKind::TokenBucket && (rl.delay.is_some() || rl.nodelay.is_some()) {
        return Err(ctx.err_at_either(
            k,
            ("delay", rl.delay.is_some()),
            "nodelay",
            "only the leaky bucket takes delay/nodelay",
        ));
    }
    let required = |name: &str, v: Option<u64>, family: &str| {
        let v = v.ok_or_else(|| {
            ctx.err(
                format!("{k}.{name}"),
                format!("missing ({family} need {name})"),
            )
        })?;
        at_least_1(ctx, &format!("{k}.{name}"), v)
    };
    let built = if is_bucket {
        let rate = required("rate", rl.rate, "buckets")?;
        let per = nonzero_dur_or(
            ctx,
            &format!("{k}.per"),
            rl.per,
            Dur(Duration::from_secs(1)),
        )?
        .nanos();
        if kind == LimitKind::TokenBucket {
            let burst = at_least_1(ctx, &format!("{k}.burst"), rl.burst.unwrap_or(rate))?;
            Limit::token_bucket(rate, per, burst)
        } else {
            let burst = at_least_1(ctx, &format!("{k}.burst"), rl.burst.unwrap_or(1))?;
            let nodelay = rl.nodelay.unwrap_or(false);
            if nodelay && rl.delay.is_some() {
                return Err(ctx.err(format!("{k}.delay"), "use either delay or nodelay"));
            }
            let delay = rl.delay.unwrap_or(0);
            if delay > burst {
                return Err(ctx.err(
                    format!("{k}.delay"),
                    format!("must not exceed burst ({burst})"),
                ));
            }
            Limit::leaky_bucket(rate, per, burst, delay, nodelay)
        }
    } else {
        let limit = required("limit", rl.limit, "windows")?;
        let window = rl
            .window
            .ok_or_else(|| ctx.err(format!("{k}.window"), "missing (windows need window)"))?;
        let window = nonzero_dur(ctx, &format!("{k}.window"), window)?.nanos();
        match kind {
            LimitKind::FixedWindow => Limit::fixed_window(limit, window),
            LimitKind::SlidingWindow => Limit::sliding_window(limit, window),
            _ => {
                if limit > MAX_SLIDING_LOG_LIMIT {
                    return Err(ctx.err(
                        format!("{k}.limit"),
                        format!(
                            "sliding_log keeps every event: at most {MAX_SLIDING_LOG_LIMIT} (use sliding_window for larger limits)"
                        ),
                    ));
                }
                Limit::sliding_log(limit, window)
            }
        }
    };
    built.map_err(|e| {
        core_err(ctx, k, e, |f| {
            if f.starts_with("burst") { "burst" } else { f }.to_string()
        })
    })
}
