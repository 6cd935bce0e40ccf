//! Reading `gateway.toml`: parse (with spans) → check → compile into a [`PolicySet`].
//!
//! Serde errors get their key path from `serde_path_to_error` and their line from toml's
//! span; each policy's compile step lives with its policy (`ratelimit::layer::compile`,
//! ...) and names its keys through [`crate::check::Ctx`], so both kinds of error read
//! the same (`gateway.toml:12: routes[0].rate_limit.burst: must be at least 1`).

pub(crate) mod raw;
mod store;
#[doc(hidden)]
pub mod writer;

pub use crate::check::ConfigError;
use crate::check::{Ctx, R, addr, line_of, method_list, nonzero_dur, unknown_name};
use crate::dur::Dur;
use crate::policy::*;
use crate::{auth, breaker, concurrency, quota, ratelimit, retry, upstream};
use raw::*;
use std::sync::Arc;
use std::time::Duration;
use toml::de::DeTable;

/// Parses and compiles a config text. `origin` names the file in errors.
pub fn parse(text: &str, origin: &str) -> Result<PolicySet, ConfigError> {
    let doc = DeTable::parse(text).map_err(|e| ConfigError {
        origin: origin.to_string(),
        line: e.span().map(|s| line_of(text, s.start)),
        key: None,
        message: format!("invalid TOML: {}", e.message()),
    })?;
    let ctx = Ctx {
        text,
        origin,
        doc: &doc,
    };
    let de = toml::Deserializer::from(doc.clone());
    let raw: RawConfig = serde_path_to_error::deserialize(de).map_err(|e| {
        let mut key = e.path().to_string();
        let inner = e.inner();
        let msg = inner.message().to_string();
        // For an unknown field, name the field itself.
        if let Some(rest) = msg.strip_prefix("unknown field `")
            && let Some(end) = rest.find('`')
        {
            let field = &rest[..end];
            if key == "." {
                key = field.to_string();
            } else if !key.ends_with(&format!(".{field}")) && key != field {
                key = format!("{key}.{}", &rest[..end]);
            }
        }
        let line = inner
            .span()
            .map(|s| line_of(text, s.start))
            .or_else(|| ctx.line_for(&key));
        ConfigError {
            origin: origin.to_string(),
            line,
            key: (key != ".").then_some(key),
            message: msg,
        }
    })?;
    compile(raw, &ctx)
}

fn compile(raw: RawConfig, ctx: &Ctx<'_>) -> R<PolicySet> {
    let server = compile_server(raw.server.unwrap_or_default(), raw.log, ctx)?;
    let quota_settings = quota::layer::compile_settings(raw.quota, ctx)?;
    let store = raw.store.map(|s| store::compile(s, ctx)).transpose()?;

    let mut upstreams: Vec<Arc<UpstreamSettings>> = Vec::new();
    for (i, u) in raw.upstreams.into_iter().enumerate() {
        let k = format!("upstreams[{i}]");
        if u.name.is_empty() {
            return Err(ctx.err(format!("{k}.name"), "must not be empty"));
        }
        if upstreams.iter().any(|x| x.name == u.name) {
            return Err(ctx.err(
                format!("{k}.name"),
                format!("duplicate upstream name {:?}", u.name),
            ));
        }
        if u.endpoints.is_empty() {
            return Err(ctx.err(format!("{k}.endpoints"), "needs at least one endpoint"));
        }
        let mut eps = Vec::new();
        for (j, e) in u.endpoints.iter().enumerate() {
            eps.push(addr(ctx, &format!("{k}.endpoints[{j}]"), e)?);
        }
        let ct = u.connect_timeout_ms.unwrap_or(1000);
        if ct == 0 {
            return Err(ctx.err(format!("{k}.connect_timeout_ms"), "must be at least 1"));
        }
        let outlier = u
            .outlier
            .map(|o| upstream::layer::compile(&format!("{k}.outlier"), o, ctx))
            .transpose()?;
        upstreams.push(Arc::new(UpstreamSettings {
            name: u.name,
            endpoints: eps,
            balance: u.balance.unwrap_or_default(),
            outlier,
            connect_timeout: Duration::from_millis(ct),
        }));
    }

    let mut identities: Vec<Arc<IdentityPolicy>> = Vec::new();
    for (i, r) in raw.identities.into_iter().enumerate() {
        let id = auth::layer::compile_identity(i, r, &identities, ctx)?;
        identities.push(Arc::new(id));
    }

    let mut routes: Vec<RoutePolicy> = Vec::new();
    for (i, r) in raw.routes.into_iter().enumerate() {
        let route = compile_route(i, r, &upstreams, &identities, store.as_ref(), ctx)?;
        if routes.iter().any(|x| x.id == route.id) {
            return Err(ctx.err(
                format!("routes[{i}].id"),
                format!("duplicate route id {:?}", route.id),
            ));
        }
        routes.push(route);
    }

    Ok(PolicySet {
        origin: ctx.origin.to_string(),
        server: Arc::new(server),
        store,
        quota: quota_settings,
        upstreams,
        identities,
        routes,
    })
}

fn compile_server(s: RawServer, log: Option<RawLog>, ctx: &Ctx<'_>) -> R<ServerSettings> {
    let listen = addr(
        ctx,
        "server.listen",
        s.listen.as_deref().unwrap_or("127.0.0.1:8080"),
    )?;
    let admin = match s.admin.as_deref().unwrap_or("127.0.0.1:9901") {
        "off" => None,
        a => Some(addr(ctx, "server.admin", a)?),
    };
    let instance = s.instance.unwrap_or_else(|| "weir".to_string());
    if instance.is_empty() || !instance.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(ctx.err(
            "server.instance",
            "must be non-empty visible ASCII (it is sent as a header)",
        ));
    }
    let max_header_bytes = s.max_header_bytes.unwrap_or(16384);
    if max_header_bytes < 256 {
        return Err(ctx.err("server.max_header_bytes", "must be at least 256"));
    }
    let header_timeout = nonzero_dur(
        ctx,
        "server.header_timeout",
        s.header_timeout.unwrap_or(Dur(Duration::from_secs(10))),
    )?;
    let idle_timeout = nonzero_dur(
        ctx,
        "server.idle_timeout",
        s.idle_timeout.unwrap_or(Dur(Duration::from_secs(60))),
    )?;
    let max_connections = s.max_connections.unwrap_or(10000);
    if max_connections == 0 {
        return Err(ctx.err("server.max_connections", "must be at least 1"));
    }
    let log = match log.and_then(|l| l.access).as_deref() {
        None | Some("stdout") => AccessLogTarget::Stdout,
        Some("off") => AccessLogTarget::Off,
        Some("") => return Err(ctx.err("log.access", "must be \"stdout\", \"off\" or a path")),
        Some(p) => AccessLogTarget::File(ctx.relative(p)),
    };
    let admin_token_sha256 = match &s.admin_token_env {
        None => None,
        Some(var) => {
            let v = crate::check::env_var(var).ok_or_else(|| {
                ctx.err(
                    "server.admin_token_env",
                    format!("environment variable {var} is not set (or not UTF-8)"),
                )
            })?;
            if v.is_empty() {
                return Err(ctx.err(
                    "server.admin_token_env",
                    format!("environment variable {var} is empty"),
                ));
            }
            Some(crate::check::sha256(v.as_bytes()))
        }
    };
    if let Some(a) = admin
        && !a.ip().is_loopback()
        && admin_token_sha256.is_none()
    {
        return Err(ctx.err(
            "server.admin",
            format!(
                "{a} is not a loopback address: set server.admin_token_env (an admin port is never open by accident)"
            ),
        ));
    }
    let mut trusted_proxies = Vec::new();
    for (i, p) in s.trusted_proxies.unwrap_or_default().iter().enumerate() {
        // A bare address is a range of one (`10.0.0.1` = `10.0.0.1/32`).
        let net = p
            .parse::<ipnet::IpNet>()
            .or_else(|_| p.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
            .map_err(|_| {
                ctx.err(
                    format!("server.trusted_proxies[{i}]"),
                    format!(
                        "expected an address or a CIDR range such as \"10.0.0.0/8\", got {p:?}"
                    ),
                )
            })?;
        trusted_proxies.push(net.trunc());
    }
    Ok(ServerSettings {
        trusted_proxies,
        admin_token_env: s.admin_token_env,
        admin_token_sha256,
        admin_read_only: s.admin_read_only.unwrap_or(false),
        evidence_headers: s.evidence_headers.unwrap_or(true),
        listen,
        admin,
        instance,
        workers: s.workers.unwrap_or(0),
        max_header_bytes,
        header_timeout: header_timeout.0,
        idle_timeout: idle_timeout.0,
        max_connections,
        drain_timeout: s.drain_timeout.unwrap_or(Dur(Duration::from_secs(10))).0,
        log,
    })
}

fn compile_route(
    i: usize,
    r: RawRoute,
    upstreams: &[Arc<UpstreamSettings>],
    identities: &[Arc<IdentityPolicy>],
    store: Option<&StoreConfig>,
    ctx: &Ctx<'_>,
) -> R<RoutePolicy> {
    let k = format!("routes[{i}]");
    if r.id.is_empty()
        || r.id == "-"
        || !r
            .id
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
    {
        return Err(ctx.err(
            format!("{k}.id"),
            "must be non-empty visible ASCII without quotes or backslashes, and not \"-\"",
        ));
    }
    if !r.match_.path_prefix.starts_with('/') {
        return Err(ctx.err(format!("{k}.match.path_prefix"), "must start with \"/\""));
    }
    let methods = match &r.match_.methods {
        Some(m) if m.is_empty() => {
            return Err(ctx.err(
                format!("{k}.match.methods"),
                "must not be empty (leave it out to match any method)",
            ));
        }
        Some(m) => Some(method_list(ctx, &format!("{k}.match.methods"), m)?),
        None => None,
    };
    if !upstreams.iter().any(|u| u.name == r.upstream) {
        let known = upstreams.iter().map(|u| u.name.as_str());
        let key = format!("{k}.upstream");
        return Err(unknown_name(ctx, key, "upstream", &r.upstream, known));
    }

    // Timeouts first: other sections' defaults depend on them.
    let t = r.timeouts.unwrap_or_default();
    let total = nonzero_dur(
        ctx,
        &format!("{k}.timeouts.total"),
        t.total.unwrap_or(Dur(Duration::from_secs(30))),
    )?;
    let per_try = nonzero_dur(
        ctx,
        &format!("{k}.timeouts.per_try"),
        t.per_try.unwrap_or(total),
    )?;
    if per_try > total {
        return Err(ctx.err(
            format!("{k}.timeouts.per_try"),
            format!("per_try ({per_try}) must not exceed total ({total})"),
        ));
    }
    let min_try = t
        .min_try
        .unwrap_or(Dur(Duration::from_millis(10)).min(per_try));
    if min_try > per_try {
        return Err(ctx.err(
            format!("{k}.timeouts.min_try"),
            format!("min_try ({min_try}) must not exceed per_try ({per_try})"),
        ));
    }
    let timeouts = TimeoutPolicy {
        total,
        per_try,
        min_try,
    };

    // Each policy's own compile step.
    let auth = r
        .auth
        .map(|a| auth::layer::compile(&format!("{k}.auth"), a, identities, ctx))
        .transpose()?;
    let rate_limit = r
        .rate_limit
        .map(|rl| {
            ratelimit::layer::compile(&format!("{k}.rate_limit"), rl, store.map(|s| s.lease), ctx)
        })
        .transpose()?;
    let quota = r
        .quota
        .map(|q| quota::layer::compile(&format!("{k}.quota"), q, store.is_some(), ctx))
        .transpose()?;
    let keys = [
        ("rate_limit", rate_limit.as_ref().map(|rl| &rl.key)),
        ("quota", quota.as_ref().map(|q| &q.key)),
    ];
    for (section, key) in keys {
        if let Some(key) = key
            && auth.is_none()
            && let Some(j) = key.iter().position(KeyPart::needs_auth)
        {
            return Err(ctx.err(
                format!("{k}.{section}.key[{j}]"),
                format!(
                    "key part {:?} needs a verified identity: add [routes.auth] to this route",
                    key[j].to_string()
                ),
            ));
        }
    }
    let concurrency = r
        .concurrency
        .map(|c| concurrency::layer::compile(&format!("{k}.concurrency"), c, total, ctx))
        .transpose()?;
    let retry = retry::layer::compile(&format!("{k}.retry"), r.retry, ctx)?;
    let breaker = r
        .breaker
        .map(|b| breaker::layer::compile(&format!("{k}.breaker"), b, total, ctx))
        .transpose()?;
    let fallback = match r.fallback {
        Some(f) => {
            if !(100..=599).contains(&f.status) {
                return Err(ctx.err(
                    format!("{k}.fallback.status"),
                    "must be an HTTP status between 100 and 599",
                ));
            }
            let content_type = f
                .content_type
                .unwrap_or_else(|| "application/json".to_string());
            if content_type.bytes().any(|b| b < 0x20 || b == 0x7f) {
                return Err(ctx.err(
                    format!("{k}.fallback.content_type"),
                    "must not contain control characters",
                ));
            }
            Some(FallbackPolicy {
                status: f.status,
                content_type,
                body: f.body.unwrap_or_default(),
            })
        }
        None => None,
    };

    Ok(RoutePolicy {
        id: r.id,
        path_prefix: r.match_.path_prefix,
        methods,
        upstream: r.upstream,
        auth,
        rate_limit,
        quota,
        concurrency,
        timeouts,
        retry,
        breaker,
        fallback,
    })
}
