//! `[quota]` and `[routes.quota]`: the file model, the compiled policy and its compile
//! step. Periods and decisions are weir-core's ([`weir_core::quota`]); this file only turns
//! the file's spelling into them.

use crate::check::{Ctx, R, at_least_1, is_token, nonzero_dur};
use crate::descriptor::{KeyPart, key_parts};
use crate::dur::Dur;
use crate::store::{OnStoreError, Scope};
use serde::{Deserialize, Serialize, Serializer};
use std::path::PathBuf;
use std::time::Duration;
use weir_core::Period;

/// `[quota] sync`: when a consumption is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncPolicy {
    /// On disk before the request goes on (`"always"`): the request waits for the ledger
    /// writer's `fdatasync` (shared by the writer's batch: group commit).
    Always,
    /// Handed to the ledger's writer thread, which writes each batch as soon as it wakes
    /// and fsyncs at this interval.
    Every(Duration),
}

impl Serialize for SyncPolicy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SyncPolicy::Always => s.serialize_str("always"),
            SyncPolicy::Every(d) => Dur(*d).serialize(s),
        }
    }
}

/// `[quota]` after defaults (the directory resolved against the config file's folder).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuotaSettings {
    /// Where the local ledgers live.
    pub dir: PathBuf,
    /// Group-commit interval, or fsync on every consumption.
    pub sync: SyncPolicy,
}

/// How much one request consumes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Cost {
    /// The same number of units for every request.
    Fixed(u64),
    /// A non-negative integer read from this request header (lowercase name).
    Header(String),
}

impl Serialize for Cost {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Cost::Fixed(n) => s.serialize_u64(*n),
            Cost::Header(h) => s.collect_str(&format_args!("header:{h}")),
        }
    }
}

/// `[routes.quota]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuotaPolicy {
    /// Units per period (before adjustments).
    pub limit: u64,
    /// How periods are cut.
    #[serde(serialize_with = "ser_period")]
    pub period: Period,
    /// Descriptor parts (as for the rate limit).
    pub key: Vec<KeyPart>,
    /// Units per request.
    pub cost: Cost,
    /// The request header whose value is the idempotent event id (lowercase name).
    pub event_id: Option<String>,
    /// Local (this instance, on disk) or global.
    pub scope: Scope,
    /// Global scope: deny or allow when the store fails.
    pub on_store_error: OnStoreError,
    /// Send the `"ROUTE.quota"` RateLimit items.
    pub headers: bool,
}

/// A quota key part longer than this is 400 `key_too_long` (the rate limit's default);
/// a missing part is 403 `empty_key` (a quota never pools requests without a key).
pub(crate) const MAX_KEY_BYTES: u64 = 256;

/// The period as the file writes it.
pub(crate) fn period_name(p: &Period) -> String {
    match p {
        Period::Day => "day".to_string(),
        Period::Month => "month".to_string(),
        Period::Every(s) => Dur(Duration::from_secs(*s)).to_string(),
    }
}

fn ser_period<S: Serializer>(p: &Period, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&period_name(p))
}

/// What `--check` prints for a quota.
pub(crate) fn describe(q: &QuotaPolicy) -> String {
    let key: Vec<String> = q.key.iter().map(|k| k.to_string()).collect();
    let cost = match &q.cost {
        Cost::Fixed(n) => n.to_string(),
        Cost::Header(h) => format!("header:{h}"),
    };
    format!(
        "{} per {}; key [{}]; cost {}; event_id {}; scope {}; headers {}",
        q.limit,
        period_name(&q.period),
        key.join(", "),
        cost,
        q.event_id
            .as_deref()
            .map_or_else(|| "none".to_string(), |h| format!("header:{h}")),
        q.scope.as_str(),
        q.headers
    )
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQuotaSettings {
    pub dir: Option<String>,
    pub sync: Option<String>,
}

/// `cost = 3` or `cost = "header:x-units"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawCost {
    Units(u64),
    Text(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQuota {
    pub key: Option<Vec<String>>,
    pub limit: u64,
    pub cost: Option<RawCost>,
    pub period: String,
    pub event_id: Option<String>,
    pub scope: Option<Scope>,
    pub on_store_error: Option<OnStoreError>,
    pub headers: Option<bool>,
}

/// The compile step of `[quota]`; `origin` is the config file (the directory is relative
/// to its folder).
pub(crate) fn compile_settings(raw: Option<RawQuotaSettings>, ctx: &Ctx<'_>) -> R<QuotaSettings> {
    let raw = raw.unwrap_or_default();
    let dir = raw.dir.unwrap_or_else(|| "weir-quota".to_string());
    if dir.is_empty() {
        return Err(ctx.err("quota.dir", "must not be empty"));
    }
    let sync = match raw.sync.as_deref() {
        None => SyncPolicy::Every(Duration::from_secs(1)),
        Some("always") => SyncPolicy::Always,
        Some(s) => {
            let d =
                Dur::parse(s).map_err(|e| ctx.err("quota.sync", format!("{e} (or \"always\")")))?;
            SyncPolicy::Every(nonzero_dur(ctx, "quota.sync", d)?.0)
        }
    };
    Ok(QuotaSettings {
        dir: ctx.relative(&dir),
        sync,
    })
}

/// `header:NAME` at `key` → the lowercase name.
fn header_ref(ctx: &Ctx<'_>, key: &str, v: &str) -> R<String> {
    match v.strip_prefix("header:") {
        Some(h) if is_token(h) => Ok(h.to_ascii_lowercase()),
        _ => Err(ctx.err(key, format!("bad value {v:?}: expected \"header:NAME\""))),
    }
}

/// The compile step of `[routes.quota]` at key prefix `k`.
pub(crate) fn compile(k: &str, q: RawQuota, have_store: bool, ctx: &Ctx<'_>) -> R<QuotaPolicy> {
    let limit = at_least_1(ctx, &format!("{k}.limit"), q.limit)?;
    let period = match q.period.as_str() {
        "day" => Period::Day,
        "month" => Period::Month,
        s => {
            let bad = |m: String| ctx.err(format!("{k}.period"), m);
            let d = Dur::parse(s).map_err(|e| bad(format!("{e} (or \"day\", \"month\")")))?;
            if d.0.subsec_nanos() != 0 || d.0.as_secs() == 0 {
                return Err(bad(format!(
                    "{s:?}: a duration period must be a whole number of seconds, at least 1s"
                )));
            }
            Period::Every(d.0.as_secs())
        }
    };
    let key = key_parts(ctx, k, q.key)?;
    let cost = match q.cost {
        None => Cost::Fixed(1),
        Some(RawCost::Units(n)) => Cost::Fixed(n),
        Some(RawCost::Text(t)) => Cost::Header(header_ref(ctx, &format!("{k}.cost"), &t)?),
    };
    let event_id = q
        .event_id
        .map(|e| header_ref(ctx, &format!("{k}.event_id"), &e))
        .transpose()?;
    let scope = q.scope.unwrap_or(Scope::Local);
    match scope {
        Scope::Global if !have_store => {
            return Err(ctx.err(
                format!("{k}.scope"),
                "scope = \"global\" needs a [store] section",
            ));
        }
        // The store compares in Lua numbers: exact below 2^53.
        Scope::Global if limit >= 1 << 53 => {
            return Err(ctx.err(
                format!("{k}.limit"),
                "a global quota's limit must be below 2^53 (9007199254740992)",
            ));
        }
        Scope::Global => {}
        Scope::Local if q.on_store_error.is_some() => {
            return Err(ctx.err(
                format!("{k}.on_store_error"),
                "only applies to scope = \"global\"",
            ));
        }
        Scope::Local => {}
    }
    Ok(QuotaPolicy {
        limit,
        period,
        key,
        cost,
        event_id,
        scope,
        on_store_error: q.on_store_error.unwrap_or(OnStoreError::Deny),
        headers: q.headers.unwrap_or(true),
    })
}
