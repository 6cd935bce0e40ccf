//! The file model: exactly what `gateway.toml` may contain, nothing more
//! (`deny_unknown_fields` everywhere). Each policy's section is modelled by its own
//! folder (`ratelimit::layer::RawRateLimit`, ...); defaults and cross-checks are applied
//! by the compile steps, not here, so every error can name the key it is about.

use crate::auth::layer::{RawAuth, RawIdentity};
use crate::breaker::layer::RawBreaker;
use crate::check::file_table;
use crate::concurrency::layer::RawConcurrency;
use crate::dur::Dur;
use crate::quota::layer::{RawQuota, RawQuotaSettings};
use crate::ratelimit::layer::RawRateLimit;
use crate::retry::layer::RawRetry;
use serde::Deserialize;

file_table! {
    #[derive(Default)]
    RawConfig {
        server: Option<RawServer>,
        store: Option<RawStore>,
        log: Option<RawLog>,
        quota: Option<RawQuotaSettings>,
        #[serde(default)]
        upstreams: Vec<RawUpstream>,
        #[serde(default)]
        routes: Vec<RawRoute>,
        #[serde(default)]
        identities: Vec<RawIdentity>,
    }
}

file_table! {
    #[derive(Default)]
    RawServer {
        listen: Option<String>,
        admin: Option<String>,
        instance: Option<String>,
        workers: Option<usize>,
        max_header_bytes: Option<usize>,
        header_timeout: Option<Dur>,
        idle_timeout: Option<Dur>,
        max_connections: Option<usize>,
        drain_timeout: Option<Dur>,
        admin_token_env: Option<String>,
        trusted_proxies: Option<Vec<String>>,
        admin_read_only: Option<bool>,
        evidence_headers: Option<bool>,
    }
}

file_table! {
    RawStore {
        kind: StoreKindRaw,
        url: Option<String>,
        cluster: Option<Vec<String>>,
        username: Option<String>,
        password: Option<String>,
        password_env: Option<String>,
        tls: Option<RawStoreTls>,
        timeout_ms: Option<u64>,
        lease: Option<u64>,
    }
}

/// `[store] tls`: `true` (system roots) or `{ ca = "file.pem" }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawStoreTls {
    On(bool),
    With(RawStoreTlsTable),
}

file_table! {
    RawStoreTlsTable {
        ca: Option<String>,
    }
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StoreKindRaw {
    Redis,
}

file_table! {
    #[derive(Default)]
    RawLog {
        access: Option<String>,
    }
}

file_table! {
    RawUpstream {
        name: String,
        endpoints: Vec<String>,
        connect_timeout_ms: Option<u64>,
        balance: Option<crate::upstream::Balance>,
        outlier: Option<crate::upstream::layer::RawOutlier>,
    }
}

file_table! {
    RawRoute {
        id: String,
        #[serde(rename = "match")]
        match_: RawMatch,
        upstream: String,
        auth: Option<RawAuth>,
        rate_limit: Option<RawRateLimit>,
        quota: Option<RawQuota>,
        concurrency: Option<RawConcurrency>,
        timeouts: Option<RawTimeouts>,
        retry: Option<RawRetry>,
        breaker: Option<RawBreaker>,
        fallback: Option<RawFallback>,
    }
}

file_table! {
    RawMatch {
        path_prefix: String,
        methods: Option<Vec<String>>,
    }
}

file_table! {
    #[derive(Default)]
    RawTimeouts {
        total: Option<Dur>,
        per_try: Option<Dur>,
        min_try: Option<Dur>,
    }
}

file_table! {
    RawFallback {
        status: u16,
        content_type: Option<String>,
        body: Option<String>,
    }
}
