//! The file model: exactly what `gateway.toml` may contain, nothing more
//! (`deny_unknown_fields` everywhere). Each policy's section is modelled by its own
//! folder (`ratelimit::layer::RawRateLimit`, ...); defaults and cross-checks are applied
//! by the compile steps, not here, so every error can name the key it is about.

use crate::auth::layer::{RawAuth, RawIdentity};
use crate::breaker::layer::RawBreaker;
use crate::concurrency::layer::RawConcurrency;
use crate::dur::Dur;
use crate::quota::layer::{RawQuota, RawQuotaSettings};
use crate::ratelimit::layer::RawRateLimit;
use crate::retry::layer::RawRetry;
use serde::Deserialize;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub server: Option<RawServer>,
    pub store: Option<RawStore>,
    pub log: Option<RawLog>,
    pub quota: Option<RawQuotaSettings>,
    #[serde(default)]
    pub upstreams: Vec<RawUpstream>,
    #[serde(default)]
    pub routes: Vec<RawRoute>,
    #[serde(default)]
    pub identities: Vec<RawIdentity>,
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
    pub admin_token_env: Option<String>,
    pub admin_read_only: Option<bool>,
    pub evidence_headers: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStore {
    pub kind: StoreKindRaw,
    pub url: Option<String>,
    pub cluster: Option<Vec<String>>,
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
    pub balance: Option<crate::upstream::Balance>,
    pub outlier: Option<crate::upstream::layer::RawOutlier>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub id: String,
    #[serde(rename = "match")]
    pub match_: RawMatch,
    pub upstream: String,
    pub auth: Option<RawAuth>,
    pub rate_limit: Option<RawRateLimit>,
    pub quota: Option<RawQuota>,
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

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTimeouts {
    pub total: Option<Dur>,
    pub per_try: Option<Dur>,
    pub min_try: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFallback {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Option<String>,
}
