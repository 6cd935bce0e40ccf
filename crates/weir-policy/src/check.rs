//! What every compile step shares: the config error (file, line, key) and the checks
//! that name the key they are about.
//!
//! Every error names the file, the line and the key (`gateway.toml:12:
//! routes[0].rate_limit.burst: must be at least 1`). A check done after deserializing
//! names a key path and looks its span up in the parsed document ([`Ctx::line_for`]), so
//! it reads the same as a serde error.

use crate::attempt::ResultSet;
use crate::dur::Dur;
use std::net::SocketAddr;
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

pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The text being compiled, for errors that name a line.
pub(crate) struct Ctx<'a> {
    pub(crate) text: &'a str,
    pub(crate) origin: &'a str,
    pub(crate) doc: &'a Spanned<DeTable<'a>>,
}
impl Ctx<'_> {
    /// The line of the deepest existing key along `path` (`a.b[2].c`).
    pub(crate) fn line_for(&self, path: &str) -> Option<usize> {
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

    /// A path named in the config: relative paths are relative to the config file's folder
    /// (as nginx and Envoy users expect), not to the working directory.
    pub(crate) fn relative(&self, file: &str) -> std::path::PathBuf {
        resolve(self.origin, file)
    }

    pub(crate) fn err(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        let key = key.into();
        ConfigError {
            origin: self.origin.to_string(),
            line: self.line_for(&key),
            key: Some(key),
            message: message.into(),
        }
    }

    /// The error at `{k}.{first}` when `first_set`, else at `{k}.{second}`: for two keys
    /// of section `k` that must go together or must not both be given.
    pub(crate) fn err_at_either(
        &self,
        k: &str,
        (first, first_set): (&str, bool),
        second: &str,
        message: impl Into<String>,
    ) -> ConfigError {
        let name = if first_set { first } else { second };
        self.err(format!("{k}.{name}"), message)
    }
}

pub(crate) type R<T> = Result<T, ConfigError>;

/// `file` relative to the folder of the config file `origin` (absolute paths as given).
pub(crate) fn resolve(origin: &str, file: &str) -> std::path::PathBuf {
    let p = std::path::Path::new(file);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    std::path::Path::new(origin)
        .parent()
        .map_or_else(|| p.to_path_buf(), |d| d.join(p))
}

/// Declares a table of the file model: a `Deserialize` struct that refuses unknown keys
/// (`deny_unknown_fields`), with `Debug` and every field `pub`. Attributes before the name
/// (docs, `#[derive(Default)]`) and before a field (`#[serde(default)]`, ...) are kept.
/// Defaults and checks belong to the compile steps, not here.
macro_rules! file_table {
    ($(#[$attr:meta])* $name:ident { $($(#[$field_attr:meta])* $field:ident: $ty:ty),* $(,)? }) => {
        $(#[$attr])*
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct $name {
            $($(#[$field_attr])* pub $field: $ty,)*
        }
    };
}
pub(crate) use file_table;

/// The list of result names at `key` (`default` when not given) as a [`ResultSet`]; an
/// unknown name is an error at `key[j]` reading `unknown {what} "name": expected {known}`.
pub(crate) fn result_set(
    ctx: &Ctx<'_>,
    key: &str,
    names: Option<Vec<String>>,
    default: &[&str],
    (what, known): (&str, &str),
) -> R<ResultSet> {
    let names = names.unwrap_or_else(|| default.iter().copied().map(String::from).collect());
    ResultSet::parse(&names).map_err(|bad| {
        let j = names.iter().position(|x| *x == bad).unwrap_or(0);
        ctx.err(
            format!("{key}[{j}]"),
            format!("unknown {what} {bad:?}: expected {known}"),
        )
    })
}

/// The error at `key` for a name that refers to nothing: `unknown {what} "{name}"
/// (known: a, b)`, or `(known: none)`.
pub(crate) fn unknown_name<'k>(
    ctx: &Ctx<'_>,
    key: String,
    what: &str,
    name: &str,
    known: impl Iterator<Item = &'k str>,
) -> ConfigError {
    let known: Vec<&str> = known.collect();
    let known = if known.is_empty() {
        "none".to_string()
    } else {
        known.join(", ")
    };
    ctx.err(key, format!("unknown {what} {name:?} (known: {known})"))
}

/// A weir-core parameter error as a config error at `{prefix}.{field}` (`key_of` maps
/// the core's field name to the config spelling).
pub(crate) fn core_err(
    ctx: &Ctx<'_>,
    prefix: &str,
    e: weir_core::ParamError,
    key_of: impl Fn(&'static str) -> String,
) -> ConfigError {
    use weir_core::ParamError as E;
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

pub(crate) fn at_least_1(ctx: &Ctx<'_>, key: &str, v: u64) -> R<u64> {
    if v == 0 {
        Err(ctx.err(key, "must be at least 1"))
    } else {
        Ok(v)
    }
}

/// [`nonzero_dur`] of the value given, else `default`.
pub(crate) fn nonzero_dur_or(ctx: &Ctx<'_>, key: &str, d: Option<Dur>, default: Dur) -> R<Dur> {
    nonzero_dur(ctx, key, d.unwrap_or(default))
}

pub(crate) fn nonzero_dur(ctx: &Ctx<'_>, key: &str, d: Dur) -> R<Dur> {
    if d.0.is_zero() {
        Err(ctx.err(key, "must be longer than 0"))
    } else {
        Ok(d)
    }
}

pub(crate) fn fraction(ctx: &Ctx<'_>, key: &str, v: f64, allow_zero: bool) -> R<f64> {
    let ok = v.is_finite() && v <= 1.0 && (if allow_zero { v >= 0.0 } else { v > 0.0 });
    if ok {
        Ok(v)
    } else if allow_zero {
        Err(ctx.err(key, "must be between 0 and 1"))
    } else {
        Err(ctx.err(key, "must be above 0 and at most 1"))
    }
}

pub(crate) fn addr(ctx: &Ctx<'_>, key: &str, s: &str) -> R<SocketAddr> {
    s.parse().map_err(|_| {
        ctx.err(
            key,
            format!("invalid address {s:?}: expected IP:PORT, e.g. \"127.0.0.1:8080\""),
        )
    })
}

pub(crate) fn method_list(ctx: &Ctx<'_>, key: &str, m: &[String]) -> R<Vec<String>> {
    let mut out = Vec::with_capacity(m.len());
    for (i, x) in m.iter().enumerate() {
        if x.is_empty() || !x.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(ctx.err(format!("{key}[{i}]"), format!("invalid method {x:?}")));
        }
        out.push(x.to_ascii_uppercase());
    }
    Ok(out)
}

pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

static TEST_ENV: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// For tests in one process (edition 2024 makes `std::env::set_var` unsafe and the
/// workspace forbids unsafe code): a value the config's `secret_env` / `admin_token_env`
/// see before the real environment. Never used by the frontends.
#[doc(hidden)]
pub fn __set_test_env(name: &str, value: &str) {
    let mut v = TEST_ENV.lock().unwrap_or_else(|p| p.into_inner());
    v.retain(|(k, _)| k != name);
    v.push((name.to_string(), value.to_string()));
}

/// An environment variable named by the config (test values first).
pub(crate) fn env_var(name: &str) -> Option<String> {
    let v = TEST_ENV.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, val)) = v.iter().find(|(k, _)| k == name) {
        return Some(val.clone());
    }
    drop(v);
    std::env::var(name).ok()
}

/// SHA-256 of a secret (API keys, the admin token): what is kept and compared, in constant
/// time, instead of the secret.
pub(crate) fn sha256(secret: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(secret).into()
}
