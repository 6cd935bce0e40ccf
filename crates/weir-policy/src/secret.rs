//! Values that must never be shown: a password, a token, the user-info of a store URL.
//!
//! A config is printed in three places a secret must not reach — `--check`, `GET
//! /admin/config` (JSON) and error messages — and a `String` field prints itself in all
//! three the moment someone adds it to a `describe` line or derives `Serialize`. A
//! [`Secret`] cannot: its `Debug`, `Display` and `Serialize` all give `"***"`, and the value
//! is reached only through [`Secret::expose`], which a reviewer can grep for. URLs that may
//! carry a password in their user-info (`redis://user:PASSWORD@host`) are shown through
//! [`redact_url`].

use core::fmt;
use serde::{Serialize, Serializer};

/// What a secret shows as wherever it is printed.
pub const REDACTED: &str = "***";

/// A secret value: printed and serialized as [`REDACTED`], never as itself.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value itself, for the one place that must send it (a store's AUTH).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{REDACTED:?}")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

/// `url` with the password of its user-info replaced by [`REDACTED`]:
/// `redis://user:pw@host:6379/0` → `redis://user:***@host:6379/0`. A user-info without a
/// `:` is taken whole as a secret (`redis://TOKEN@host` is how some providers hand out a
/// password), so it shows as `***@host`. Anything after the authority (path, query,
/// fragment) is kept only when it holds no `@`, `=` or `:`; otherwise it is redacted too,
/// since a query string may carry a token.
pub fn redact_url(url: &str) -> String {
    if url.is_empty() {
        return String::new();
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        // Not a URL we understand: show nothing of it.
        return REDACTED.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = match authority.rsplit_once('@') {
        None => authority.to_string(),
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:{REDACTED}@{host}"),
            None => format!("{REDACTED}@{host}"),
        },
    };
    let tail = if tail.contains(['@', '=', ':']) {
        let cut = tail.find(['?', '#']).unwrap_or(tail.len());
        let (path, q) = tail.split_at(cut);
        let path = if path.contains(['@', '=', ':']) {
            REDACTED
        } else {
            path
        };
        if q.is_empty() {
            path.to_string()
        } else {
            format!("{path}{}{REDACTED}", &q[..1])
        }
    } else {
        tail.to_string()
    };
    format!("{scheme}://{host}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_print_as_stars_everywhere() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "\"***\"");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"***\"");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn urls_lose_their_passwords() {
        let cases = [
            ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
            (
                "redis://:pw@127.0.0.1:6379/0",
                "redis://:***@127.0.0.1:6379/0",
            ),
            ("rediss://user:p@ss@h:1/2", "rediss://user:***@h:1/2"),
            ("redis://token@h", "redis://***@h"),
            ("redis://h/0?password=x", "redis://h/0?***"),
            ("redis://h/0#insecure", "redis://h/0#insecure"),
            ("nonsense:pw@host", "***"),
        ];
        for (url, want) in cases {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }

    proptest::proptest! {
        /// Whatever the URL, a password placed in its user-info never survives redaction.
        #[test]
        fn no_password_survives(user in "[a-z]{0,6}", pw in "[A-Za-z0-9!$%]{4,16}", host in "[a-z0-9.]{1,12}",
                                tail in "(/[0-9]{1,2})?") {
            let url = format!("redis://{user}:{pw}@{host}:6379{tail}");
            let shown = redact_url(&url);
            proptest::prop_assert!(!shown.contains(&format!(":{pw}@")), "{shown}");
            proptest::prop_assert!(shown.ends_with(&format!("@{host}:6379{tail}")), "{shown}");
        }
    }
}
