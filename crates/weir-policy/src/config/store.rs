//! `[store]`: one Redis server (`url`) or a Redis Cluster (`cluster`, seed nodes), checked
//! here so a mistake names its key and line before anything connects.

use super::raw::{RawStore, RawStoreTls, StoreKindRaw};
use crate::check::{Ctx, R};
use crate::policy::{StoreConfig, StoreTls};
use crate::secret::Secret;
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
    let url = s.url.unwrap_or_default();
    if !(url.is_empty() || url.starts_with("redis://") || url.starts_with("rediss://")) {
        // The URL itself is not repeated: it may carry a password.
        return Err(ctx.err(
            "store.url",
            "expected redis://[user[:password]@]host[:port][/db] or rediss://... (TLS)",
        ));
    }
    let in_url = url_has_password(&url);
    let password = match (s.password, s.password_env) {
        (Some(_), Some(_)) => {
            return Err(ctx.err(
                "store.password_env",
                "give the password either as password or as password_env, not both",
            ));
        }
        (Some(p), None) => Some(Secret::new(p)),
        (None, Some(var)) => Some(Secret::new(crate::check::env_var(&var).ok_or_else(
            || {
                ctx.err(
                    "store.password_env",
                    format!("environment variable {var} is not set (or not UTF-8)"),
                )
            },
        )?)),
        (None, None) => None,
    };
    if password.is_some() && in_url {
        return Err(ctx.err(
            "store.url",
            "has a password and so does password/password_env: give it once",
        ));
    }
    if password.as_ref().is_some_and(|p| p.expose().is_empty()) {
        return Err(ctx.err("store.password", "must not be empty"));
    }
    if s.username.as_deref() == Some("") {
        return Err(ctx.err("store.username", "must not be empty"));
    }
    let tls = match s.tls {
        None | Some(RawStoreTls::On(false)) => None,
        Some(RawStoreTls::On(true)) => Some(StoreTls::default()),
        Some(RawStoreTls::With(t)) => {
            let ca = match t.ca {
                None => None,
                Some(f) if f.is_empty() => return Err(ctx.err("store.tls.ca", "must not be empty")),
                Some(f) => {
                    let path = ctx.relative(&f);
                    let pem = std::fs::read(&path).map_err(|e| {
                        ctx.err(
                            "store.tls.ca",
                            format!("cannot read {}: {e}", path.display()),
                        )
                    })?;
                    if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                        return Err(ctx.err(
                            "store.tls.ca",
                            format!("{}: no PEM certificate in it", path.display()),
                        ));
                    }
                    Some((path, pem))
                }
            };
            Some(StoreTls { ca })
        }
    };
    let timeout = Duration::from_millis(s.timeout_ms.unwrap_or(100));
    if timeout.is_zero() {
        return Err(ctx.err("store.timeout_ms", "must be at least 1"));
    }
    Ok(StoreConfig {
        kind: match s.kind {
            StoreKindRaw::Redis => "redis".to_string(),
        },
        url,
        cluster,
        username: s.username,
        password,
        tls,
        timeout,
        lease: s.lease.unwrap_or(0),
    })
}

/// Whether the user-info of `url` holds a password (`redis://user:pw@...`, or a lone
/// token `redis://token@...`, which Redis clients read as a password).
fn url_has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    authority.rsplit_once('@').is_some_and(|(userinfo, _)| {
        userinfo
            .split_once(':')
            .map_or(!userinfo.is_empty(), |(_, pw)| !pw.is_empty())
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
