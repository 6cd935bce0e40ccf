//! `[store]`: one Redis server (`url`) or a Redis Cluster (`cluster`, seed nodes), checked
//! here so a mistake names its key and line before anything connects.

use super::raw::{RawStore, StoreKindRaw};
use crate::check::{Ctx, R};
use crate::policy::StoreConfig;
use std::time::Duration;

/// The compile step of `[store]`.
pub(crate) fn compile(s: RawStore, ctx: &Ctx<'_>) -> R<StoreConfig> {
    let cluster = match (&s.url, s.cluster) {
        (Some(_), Some(_)) => {
            return Err(ctx.err(
                "store.cluster",
                "use either url (one server) or cluster (seed nodes), not both",
            ));
        }
        (None, None) => {
            return Err(ctx.err(
                "store.url",
                "missing (give url for one server, or cluster = [\"host:port\", ...])",
            ));
        }
        (_, Some(c)) if c.is_empty() => {
            return Err(ctx.err("store.cluster", "needs at least one seed node"));
        }
        (_, c) => c.unwrap_or_default(),
    };
    for (i, node) in cluster.iter().enumerate() {
        if !is_host_port(node) {
            return Err(ctx.err(
                format!("store.cluster[{i}]"),
                format!("expected host:port (no scheme), got {node:?}"),
            ));
        }
    }
    let timeout = Duration::from_millis(s.timeout_ms.unwrap_or(100));
    if timeout.is_zero() {
        return Err(ctx.err("store.timeout_ms", "must be at least 1"));
    }
    Ok(StoreConfig {
        kind: match s.kind {
            StoreKindRaw::Redis => "redis".to_string(),
        },
        url: s.url.unwrap_or_default(),
        cluster,
        timeout,
        lease: s.lease.unwrap_or(0),
    })
}

/// `host:port` with a non-empty host of name characters (or a bracketed IPv6 address) and
/// a port of 1..=65535.
fn is_host_port(s: &str) -> bool {
    let Some((host, port)) = s.rsplit_once(':') else {
        return false;
    };
    let host_ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        v6.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
    };
    host_ok && port.parse::<u16>().is_ok_and(|p| p > 0)
}
