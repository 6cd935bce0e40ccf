//! [`ConfigText`]: config files written table by table, for the tests, the benchmarks and
//! the `--demo` config.
//!
//! Those all need the same few shapes — a JWT or API-key identity, an upstream that is never
//! dialled, a route guarded by `[routes.auth]`, a rate limit keyed by consumer — and
//! pasting the TOML into every one of them made the same twenty lines stand in six places,
//! each drifting on its own. One writer renders each shape once. It emits plain TOML text
//! (nothing is validated here: [`crate::config::parse`] does that), one `key = value` a
//! line, in call order, starting with an empty line like the raw-string literals it
//! replaces, so the line numbers in config errors stay what a test expects.

use std::fmt::Write as _;

/// A config file being written. Each method appends a table (or keys to the table just
/// opened) and returns the writer; [`ConfigText::render`] gives the text.
#[derive(Clone, Debug)]
pub struct ConfigText {
    text: String,
}

/// A value of a `key = value` line.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    /// A TOML string (quoted and escaped here).
    Str(&'a str),
    /// An integer.
    Int(i64),
    /// An array of strings.
    List(&'a [&'a str]),
    /// TOML as written (an inline table, a boolean, ...).
    Raw(&'a str),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::Str(s)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(s: &'a String) -> Self {
        Value::Str(s)
    }
}

impl From<i64> for Value<'_> {
    fn from(n: i64) -> Self {
        Value::Int(n)
    }
}

impl From<i32> for Value<'_> {
    fn from(n: i32) -> Self {
        Value::Int(n.into())
    }
}

impl<'a> From<&'a [&'a str]> for Value<'a> {
    fn from(l: &'a [&'a str]) -> Self {
        Value::List(l)
    }
}

impl<'a, const N: usize> From<&'a [&'a str; N]> for Value<'a> {
    fn from(l: &'a [&'a str; N]) -> Self {
        Value::List(l)
    }
}

/// Where a JWT identity finds its verification keys.
#[derive(Clone, Copy, Debug)]
pub enum JwtKeys<'a> {
    /// A JWKS file (`jwks = PATH`).
    Jwks(&'a str),
    /// An HS256 secret in an environment variable (`secret_env = NAME`).
    SecretEnv(&'a str),
}

impl Default for ConfigText {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigText {
    /// An empty file (one empty first line).
    #[must_use]
    pub fn new() -> Self {
        ConfigText { text: "\n".into() }
    }

    /// Appends TOML as written (a line of its own).
    #[must_use]
    pub fn raw(mut self, toml: &str) -> Self {
        self.text.push_str(toml);
        if !toml.ends_with('\n') {
            self.text.push('\n');
        }
        self
    }

    /// Opens `[header]` (or `[[header]]` when `header` is written so).
    #[must_use]
    pub fn table(mut self, header: &str) -> Self {
        if header.starts_with('[') {
            let _ = writeln!(self.text, "{header}");
        } else {
            let _ = writeln!(self.text, "[{header}]");
        }
        self
    }

    /// Appends `key = value` to the table opened last.
    #[must_use]
    pub fn set<'a>(mut self, key: &str, value: impl Into<Value<'a>>) -> Self {
        let _ = write!(self.text, "{key} = ");
        match value.into() {
            Value::Str(s) => push_str(&mut self.text, s),
            Value::Int(n) => {
                let _ = write!(self.text, "{n}");
            }
            Value::List(l) => {
                self.text.push('[');
                for (i, s) in l.iter().enumerate() {
                    if i > 0 {
                        self.text.push_str(", ");
                    }
                    push_str(&mut self.text, s);
                }
                self.text.push(']');
            }
            Value::Raw(r) => self.text.push_str(r),
        }
        self.text.push('\n');
        self
    }

    /// `[log]` with `access = ACCESS` (`"off"`, `"stdout"`, ...).
    #[must_use]
    pub fn log(self, access: &str) -> Self {
        self.table("log").set("access", access)
    }

    /// A JWT identity `name` with its keys; `issuer`, `algorithms`, `audience`, ... follow
    /// with [`ConfigText::set`].
    #[must_use]
    pub fn jwt(self, name: &str, keys: JwtKeys<'_>) -> Self {
        let t = self.identity(name, "jwt");
        match keys {
            JwtKeys::Jwks(path) => t.set("jwks", path),
            JwtKeys::SecretEnv(var) => t.set("secret_env", var),
        }
    }

    /// An API-key identity `name` reading its keys from the file `keys`.
    #[must_use]
    pub fn api_keys(self, name: &str, keys: &str) -> Self {
        self.identity(name, "api_key").set("keys", keys)
    }

    /// An `[[identities]]` entry opened with its `name` and `kind`.
    #[must_use]
    pub fn identity(self, name: &str, kind: &str) -> Self {
        self.table("[[identities]]")
            .set("name", name)
            .set("kind", kind)
    }

    /// An upstream `name` with one endpoint.
    #[must_use]
    pub fn upstream(self, name: &str, endpoint: &str) -> Self {
        self.table("[[upstreams]]")
            .set("name", name)
            .set("endpoints", &[endpoint])
    }

    /// A route `id` for the paths under `prefix`, to `upstream`.
    #[must_use]
    pub fn route(self, id: &str, prefix: &str, upstream: &str) -> Self {
        let mut m = String::from("{ path_prefix = ");
        push_str(&mut m, prefix);
        m.push_str(" }");
        self.table("[[routes]]")
            .set("id", id)
            .set("match", Value::Raw(&m))
            .set("upstream", upstream)
    }

    /// The last route's `[routes.auth]`: `identity`, needing `scopes` (none: no `scopes` key).
    #[must_use]
    pub fn auth(self, identity: &str, scopes: &[&str]) -> Self {
        let t = self.table("routes.auth").set("identity", identity);
        if scopes.is_empty() {
            t
        } else {
            t.set("scopes", scopes)
        }
    }

    /// The last route's `[routes.rate_limit]` with its `algorithm`; its amounts, `key`, ...
    /// follow with [`ConfigText::set`].
    #[must_use]
    pub fn rate_limit(self, algorithm: &str) -> Self {
        self.table("routes.rate_limit").set("algorithm", algorithm)
    }

    /// The text written so far.
    #[must_use]
    pub fn render(&self) -> String {
        self.text.clone()
    }
}

/// Appends `s` as a TOML basic string. A JSON string literal is one (TOML's basic-string
/// escapes are JSON's: `\"`, `\\`, `\n`, `\uXXXX`, ...), so `serde_json`, already a
/// dependency, does the quoting.
fn push_str(out: &mut String, s: &str) {
    out.push_str(&serde_json::Value::from(s).to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_parseable_toml_line_by_line() {
        let t = ConfigText::new()
            .log("off")
            .jwt("users", JwtKeys::SecretEnv("SECRET_VAR"))
            .set("issuer", "iss \"q\"\u{1}")
            .set("algorithms", &["HS256"])
            .upstream("u", "127.0.0.1:1")
            .route("r", "/", "u")
            .auth("users", &["read", "write"])
            .rate_limit("fixed_window")
            .set("limit", 1)
            .render();
        let want = "\n[log]\naccess = \"off\"\n[[identities]]\nname = \"users\"\n\
            kind = \"jwt\"\nsecret_env = \"SECRET_VAR\"\nissuer = \"iss \\\"q\\\"\\u0001\"\n\
            algorithms = [\"HS256\"]\n[[upstreams]]\nname = \"u\"\n\
            endpoints = [\"127.0.0.1:1\"]\n[[routes]]\nid = \"r\"\n\
            match = { path_prefix = \"/\" }\nupstream = \"u\"\n[routes.auth]\n\
            identity = \"users\"\nscopes = [\"read\", \"write\"]\n[routes.rate_limit]\n\
            algorithm = \"fixed_window\"\nlimit = 1\n";
        assert_eq!(t, want);
        let doc: toml::Table = toml::from_str(&t).unwrap();
        assert_eq!(
            doc["identities"][0]["issuer"].as_str(),
            Some("iss \"q\"\u{1}")
        );
    }
}
