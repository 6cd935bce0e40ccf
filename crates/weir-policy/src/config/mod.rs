//! Reading `gateway.toml`: parse (with spans) → check → compile into a [`PolicySet`].
//!
//! Every error names the file, the line and the key (`gateway.toml:12:
//! routes[0].rate_limit.burst: must be at least 1`). Serde errors get their key path from
//! `serde_path_to_error` and their line from toml's span; the checks done after
//! deserializing name a key path and look its span up in the parsed document, so the
//! two kinds of error read the same.

pub(crate) mod raw;

use crate::policy::*;
use raw::*;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A config file that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or origin name given to [`crate::Engine::from_toml`]).
    pub origin: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Key path such as `routes[0].rate_limit.burst`, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        f.write_str(": ")?;
        if let Some(k) = &self.key {
            write!(f, "{k}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    pub(crate) fn plain(origin: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            origin: origin.to_string(),
            line: None,
            key: None,
            message: message.into(),
        }
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Parses and compiles a config text. `origin` names the file in errors.
pub fn parse(text: &str, origin: &str) -> Result<PolicySet, ConfigError> {
    let doc = DeTable::parse(text).map_err(|e| ConfigError {
        origin: origin.to_string(),
        line: e.span().map(|s| line_of(text, s.start)),
        key: None,
        message: format!("invalid TOML: {}", e.message()),
    })?;
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
        let ctx = Ctx {
            text,
            origin,
            doc: &doc,
        };
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
    let ctx = Ctx {
        text,
        origin,
        doc: &doc,
    };
    compile(raw, &ctx)
}

struct Ctx<'a> {
    text: &'a str,
    origin: &'a str,
    doc: &'a Spanned<DeTable<'a>>,
}

impl Ctx<'_> {
    /// The line of the deepest existing key along `path` (`a.b[2].c`).
    fn line_for(&self, path: &str) -> Option<usize> {
        let mut span = self.doc.span();
        let mut cur: Option<&DeValue<'_>> = None;
        let mut table: Option<&DeTable<'_>> = Some(self.doc.get_ref());
        for seg in path.split('.') {
            let (name, idx) = match seg.find('[') {
                Some(i) => (
                    &seg[..i],
                    seg[i + 1..].trim_end_matches(']').parse::<usize>().ok(),
                ),
                None => (seg, None),
            };
            if !name.is_empty() {
                let t = match (table, cur) {
                    (Some(t), _) => t,
                    (None, Some(DeValue::Table(t))) => t,
                    _ => break,
                };
                let Some(v) = t.get(name) else { break };
                span = v.span();
                cur = Some(v.get_ref());
                table = None;
            }
            if let Some(i) = idx {
                let Some(DeValue::Array(a)) = cur else { break };
                let Some(v) = a.get(i) else { break };
                span = v.span();
                cur = Some(v.get_ref());
                table = None;
            }
        }
        Some(line_of(self.text, span.start))
    }

    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        let key = key.into();
        ConfigError {
            origin: self.origin.to_string(),
            line: self.line_for(&key),
            key: Some(key),
            message: message.into(),
        }
    }
}

type R<T> = Result<T, ConfigError>;

/// A weir-core parameter error as a config error at `{prefix}.{field}` (`key_of` maps
/// the core's field name to the config spelling).
fn core_err(
    ctx: &Ctx<'_>,
    prefix: &str,
    e: crate::glue::CoreError,
    key_of: impl Fn(&'static str) -> String,
) -> ConfigError {
    use crate::glue::CoreError as E;
    let field = match e {
        E::Zero(f) | E::TooLarge(f) | E::OutOfRange(f) => Some(f),
        E::Order { low, .. } => Some(low),
        E::LimitAboveCapacity { .. } => Some("limit"),
    };
    let key = match field {
        Some(f) => format!("{prefix}.{}", key_of(f)),
        None => prefix.to_string(),
    };
    let msg = match e {
        E::OutOfRange("window") => {
            format!("out of range (at most {})", weir_core::breaker::WINDOW_MAX)
        }
        E::OutOfRange("probes") | E::OutOfRange("successes") => {
            format!("out of range (at most {})", weir_core::breaker::PROBES_MAX)
        }
        E::OutOfRange("consecutive_failures") => format!(
            "out of range (at most {})",
            weir_core::breaker::CONSECUTIVE_MAX
        ),
        E::OutOfRange("ttl") => "must be at least 1s".to_string(),
        E::OutOfRange("cooldown.multiplier") | E::OutOfRange("multiplier") => {
            "out of range (1.0 to 1000)".to_string()
        }
        other => other.to_string(),
    };
    ctx.err(key, msg)
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

fn at_least_1(ctx: &Ctx<'_>, key: &str, v: u64) -> R<u64> {
    if v == 0 {
        Err(ctx.err(key, "must be at least 1"))
    } else {
        Ok(v)
    }
}

fn nonzero_dur(ctx: &Ctx<'_>, key: &str, d: Dur) -> R<Dur> {
    if d.0.is_zero() {
        Err(ctx.err(key, "must be longer than 0"))
    } else {
        Ok(d)
    }
}

fn fraction(ctx: &Ctx<'_>, key: &str, v: f64, allow_zero: bool) -> R<f64> {
    let ok = v.is_finite() && v <= 1.0 && (if allow_zero { v >= 0.0 } else { v > 0.0 });
    if ok {
        Ok(v)
    } else if allow_zero {
        Err(ctx.err(key, "must be between 0 and 1"))
    } else {
        Err(ctx.err(key, "must be above 0 and at most 1"))
    }
}

fn addr(ctx: &Ctx<'_>, key: &str, s: &str) -> R<SocketAddr> {
    s.parse().map_err(|_| {
        ctx.err(
            key,
            format!("invalid address {s:?}: expected IP:PORT, e.g. \"127.0.0.1:8080\""),
        )
    })
}

fn method_list(ctx: &Ctx<'_>, key: &str, m: &[String]) -> R<Vec<String>> {
    let mut out = Vec::with_capacity(m.len());
    for (i, x) in m.iter().enumerate() {
        if x.is_empty() || !x.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(ctx.err(format!("{key}[{i}]"), format!("invalid method {x:?}")));
        }
        out.push(x.to_ascii_uppercase());
    }
    Ok(out)
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn compile(raw: RawConfig, ctx: &Ctx<'_>) -> R<PolicySet> {
    let server = compile_server(raw.server.unwrap_or_default(), raw.log, ctx)?;
    let store = raw.store.map(|s| StoreConfig {
        kind: match s.kind {
            StoreKindRaw::Redis => "redis".to_string(),
        },
        url: s.url,
        timeout: Duration::from_millis(s.timeout_ms.unwrap_or(100)),
        lease: s.lease.unwrap_or(0),
    });
    if let Some(s) = &store
        && s.timeout.is_zero()
    {
        return Err(ctx.err("store.timeout_ms", "must be at least 1"));
    }

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
        upstreams.push(Arc::new(UpstreamSettings {
            name: u.name,
            endpoints: eps,
            connect_timeout: Duration::from_millis(ct),
        }));
    }

    let mut routes: Vec<RoutePolicy> = Vec::new();
    for (i, r) in raw.routes.into_iter().enumerate() {
        let route = compile_route(i, r, &upstreams, store.is_some(), ctx)?;
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
        upstreams,
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
        Some(p) => AccessLogTarget::File(p.into()),
    };
    Ok(ServerSettings {
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
    have_store: bool,
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
        let known: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
        return Err(ctx.err(
            format!("{k}.upstream"),
            format!(
                "unknown upstream {:?} (known: {})",
                r.upstream,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        ));
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

    let rate_limit = match r.rate_limit {
        Some(rl) => Some(compile_rate_limit(
            &format!("{k}.rate_limit"),
            rl,
            have_store,
            ctx,
        )?),
        None => None,
    };

    let concurrency = match r.concurrency {
        Some(c) => {
            let kk = format!("{k}.concurrency");
            Some(ConcurrencyPolicy {
                max: at_least_1(ctx, &format!("{kk}.max"), c.max)?,
                queue: c.queue.unwrap_or(0),
                queue_timeout: match c.queue_timeout {
                    Some(d) => nonzero_dur(ctx, &format!("{kk}.queue_timeout"), d)?,
                    None => total,
                },
            })
        }
        None => None,
    };

    let retry = compile_retry(&format!("{k}.retry"), r.retry, ctx)?;
    let breaker = match r.breaker {
        Some(b) => {
            let kb = format!("{k}.breaker");
            let b = compile_breaker(&kb, b, ctx)?;
            crate::glue::breaker_config(&b, total.0.into())
                .map_err(|e| core_err(ctx, &kb, e, breaker_key))?;
            Some(b)
        }
        None => None,
    };
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
        rate_limit,
        concurrency,
        timeouts,
        retry,
        breaker,
        fallback,
    })
}

fn compile_rate_limit(
    k: &str,
    rl: RawRateLimit,
    have_store: bool,
    ctx: &Ctx<'_>,
) -> R<RateLimitPolicy> {
    let is_bucket = matches!(
        rl.algorithm,
        AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket
    );
    let alg_name = serde_json::to_value(rl.algorithm)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
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
    for (name, present) in misplaced {
        if *present {
            return Err(ctx.err(
                format!("{k}.{name}"),
                format!(
                    "not used by algorithm {alg_name:?} ({})",
                    if is_bucket {
                        "buckets take rate, per, burst"
                    } else {
                        "windows take limit and window"
                    }
                ),
            ));
        }
    }
    if rl.algorithm == AlgorithmKind::TokenBucket && (rl.delay.is_some() || rl.nodelay.is_some()) {
        let name = if rl.delay.is_some() {
            "delay"
        } else {
            "nodelay"
        };
        return Err(ctx.err(
            format!("{k}.{name}"),
            "only the leaky bucket takes delay/nodelay",
        ));
    }
    let algorithm = if is_bucket {
        let rate = at_least_1(
            ctx,
            &format!("{k}.rate"),
            rl.rate
                .ok_or_else(|| ctx.err(format!("{k}.rate"), "missing (buckets need rate)"))?,
        )?;
        let per = nonzero_dur(
            ctx,
            &format!("{k}.per"),
            rl.per.unwrap_or(Dur(Duration::from_secs(1))),
        )?;
        if rl.algorithm == AlgorithmKind::TokenBucket {
            let burst = at_least_1(ctx, &format!("{k}.burst"), rl.burst.unwrap_or(rate))?;
            Algorithm::TokenBucket { rate, per, burst }
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
            Algorithm::LeakyBucket {
                rate,
                per,
                burst,
                delay,
                nodelay,
            }
        }
    } else {
        let limit = at_least_1(
            ctx,
            &format!("{k}.limit"),
            rl.limit
                .ok_or_else(|| ctx.err(format!("{k}.limit"), "missing (windows need limit)"))?,
        )?;
        let window = nonzero_dur(
            ctx,
            &format!("{k}.window"),
            rl.window
                .ok_or_else(|| ctx.err(format!("{k}.window"), "missing (windows need window)"))?,
        )?;
        match rl.algorithm {
            AlgorithmKind::FixedWindow => Algorithm::FixedWindow { limit, window },
            AlgorithmKind::SlidingWindow => Algorithm::SlidingWindow { limit, window },
            _ => {
                if limit > crate::glue::SLIDING_LOG_CAPACITY as u64 {
                    return Err(ctx.err(
                        format!("{k}.limit"),
                        format!(
                            "sliding_log keeps every event: at most {} (use sliding_window for larger limits)",
                            crate::glue::SLIDING_LOG_CAPACITY
                        ),
                    ));
                }
                Algorithm::SlidingLog { limit, window }
            }
        }
    };
    crate::glue::check_algorithm(&algorithm).map_err(|e| {
        core_err(ctx, k, e, |f| {
            if f.starts_with("burst") { "burst" } else { f }.to_string()
        })
    })?;
    let key_strs = rl.key.unwrap_or_else(|| vec!["route".to_string()]);
    if key_strs.is_empty() {
        return Err(ctx.err(format!("{k}.key"), "needs at least one part"));
    }
    let mut key = Vec::new();
    for (j, p) in key_strs.iter().enumerate() {
        let part = match p.as_str() {
            "route" => KeyPart::Route,
            "method" => KeyPart::Method,
            "client_ip" => KeyPart::ClientIp,
            h if h.starts_with("header:") && is_token(&h[7..]) => {
                KeyPart::Header(h[7..].to_ascii_lowercase())
            }
            other => {
                return Err(ctx.err(
                    format!("{k}.key[{j}]"),
                    format!(
                        "bad key part {other:?}: expected route, method, client_ip or header:NAME"
                    ),
                ));
            }
        };
        key.push(part);
    }
    let scope = rl.scope.unwrap_or(Scope::Local);
    if scope == Scope::Global && !have_store {
        return Err(ctx.err(
            format!("{k}.scope"),
            "scope = \"global\" needs a [store] section",
        ));
    }
    if scope == Scope::Local && rl.on_store_error.is_some() {
        return Err(ctx.err(
            format!("{k}.on_store_error"),
            "only applies to scope = \"global\"",
        ));
    }
    Ok(RateLimitPolicy {
        algorithm,
        key,
        deny_empty_key: rl.deny_empty_key.unwrap_or(true),
        scope,
        on_store_error: rl.on_store_error.unwrap_or(OnStoreError::Deny),
        mode: rl.mode.unwrap_or(Mode::Enforce),
        max_keys: at_least_1(
            ctx,
            &format!("{k}.max_keys"),
            rl.max_keys.unwrap_or(100_000),
        )?,
        max_key_bytes: at_least_1(
            ctx,
            &format!("{k}.max_key_bytes"),
            rl.max_key_bytes.unwrap_or(256),
        )?,
    })
}

fn compile_retry(k: &str, r: Option<RawRetry>, ctx: &Ctx<'_>) -> R<RetryPolicy> {
    let present = r.is_some();
    let r = r.unwrap_or_default();
    let max_attempts = match r.max_attempts {
        Some(n) => at_least_1(ctx, &format!("{k}.max_attempts"), n)?,
        None if present => 2,
        None => 1,
    };
    let max_attempts = u32::try_from(max_attempts)
        .map_err(|_| ctx.err(format!("{k}.max_attempts"), "too large"))?;
    let on_names = r.on.unwrap_or_else(|| {
        [
            "connect_failure",
            "reset",
            "protocol_error",
            "per_try_timeout",
            "502",
            "503",
            "504",
        ]
        .map(String::from)
        .to_vec()
    });
    let on = ResultSet::parse(&on_names).map_err(|bad| {
        let j = on_names.iter().position(|x| *x == bad).unwrap_or(0);
        ctx.err(
            format!("{k}.on[{j}]"),
            format!(
                "unknown retry condition {bad:?}: expected connect_failure, reset, protocol_error, per_try_timeout, 5xx or a status code"
            ),
        )
    })?;
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
    let bu = r.budget.unwrap_or_default();
    let ratio = bu.ratio.unwrap_or(0.2);
    if !(ratio.is_finite() && (0.0..=1000.0).contains(&ratio)) {
        return Err(ctx.err(format!("{k}.budget.ratio"), "must be 0 or more"));
    }
    let budget = BudgetPolicy {
        ratio,
        min_per_sec: bu.min_per_sec.unwrap_or(10),
        ttl: nonzero_dur(
            ctx,
            &format!("{k}.budget.ttl"),
            bu.ttl.unwrap_or(Dur(Duration::from_secs(10))),
        )?,
    };
    crate::glue::backoff(&backoff)
        .map_err(|e| core_err(ctx, &format!("{k}.backoff"), e, |f| f.to_string()))?;
    crate::glue::budget_config(&budget)
        .map_err(|e| core_err(ctx, &format!("{k}.budget"), e, |f| f.to_string()))?;
    Ok(RetryPolicy {
        max_attempts,
        on,
        idempotency_header: idempotency_header.to_ascii_lowercase(),
        methods,
        backoff,
        budget,
        max_replay_bytes: r.max_replay_bytes.unwrap_or(65536),
    })
}

fn compile_breaker(k: &str, b: RawBreaker, ctx: &Ctx<'_>) -> R<BreakerPolicy> {
    let names = b.failure_on.unwrap_or_else(|| {
        ["5xx", "connect_failure", "timeout"]
            .map(String::from)
            .to_vec()
    });
    let failure_on = ResultSet::parse(&names).map_err(|bad| {
        let j = names.iter().position(|x| *x == bad).unwrap_or(0);
        ctx.err(
            format!("{k}.failure_on[{j}]"),
            format!(
                "unknown failure kind {bad:?}: expected 5xx, connect_failure, timeout, reset, protocol_error or a status code"
            ),
        )
    })?;
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
        let key = if b.slow_call.is_some() {
            "slow_call_rate"
        } else {
            "slow_call"
        };
        return Err(ctx.err(
            format!("{k}.{key}"),
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
    let cooldown_base = nonzero_dur(
        ctx,
        &format!("{k}.cooldown.base"),
        c.base.unwrap_or(Dur(Duration::from_secs(5))),
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
