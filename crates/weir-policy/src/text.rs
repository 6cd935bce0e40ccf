//! [`HeaderText`]: the header values the engine hands to frontends on the request path.
//!
//! Several values go out on every proxied request and are the same each time (the instance
//! name, a route's `RateLimit-Policy`, the attempt count `1`), and the request id goes out
//! twice (upstream and downstream). As `String`s each of those was a fresh allocation, a copy
//! and a free per request, and once more in a frontend whose header map keeps values as
//! [`bytes::Bytes`] (Pingora's `http::HeaderValue`). A `HeaderText` is UTF-8 text in a
//! `Bytes`: built once (per config revision, per request), cloned by a reference count, and
//! taken by such frontends without a copy ([`HeaderText::into_bytes`]).

use bytes::Bytes;

/// A header value: UTF-8 text, cheap to clone (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct HeaderText(Bytes);

impl HeaderText {
    /// A value from static text (no allocation, ever).
    pub const fn from_static(s: &'static str) -> HeaderText {
        HeaderText(Bytes::from_static(s.as_bytes()))
    }

    /// The value as text.
    pub fn as_str(&self) -> &str {
        // Only ever built from `str`/`String` (the type's invariant), so this never fails.
        core::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The value as `Bytes` (shares the buffer).
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// `n` in decimal; small counts (attempt numbers) are static.
    pub(crate) fn from_count(n: u32) -> HeaderText {
        const SMALL: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
        match SMALL.get(n as usize) {
            Some(s) => HeaderText::from_static(s),
            None => HeaderText::from(n.to_string()),
        }
    }
}

impl From<String> for HeaderText {
    /// Takes the string's buffer (no copy).
    fn from(s: String) -> HeaderText {
        HeaderText(Bytes::from(s))
    }
}

impl From<&'static str> for HeaderText {
    fn from(s: &'static str) -> HeaderText {
        HeaderText::from_static(s)
    }
}

impl From<HeaderText> for String {
    fn from(t: HeaderText) -> String {
        t.as_str().to_string()
    }
}

impl core::ops::Deref for HeaderText {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for HeaderText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for HeaderText {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl PartialEq<str> for HeaderText {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for HeaderText {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl core::fmt::Debug for HeaderText {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl core::fmt::Display for HeaderText {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::HeaderText;

    #[test]
    fn text_round_trips() {
        let t = HeaderText::from("abc".to_string());
        assert_eq!(t.as_str(), "abc");
        assert_eq!(t, "abc");
        assert_eq!(t.clone().into_bytes().as_ref(), b"abc");
        assert_eq!(format!("{t} {t:?}"), "abc \"abc\"");
        for n in [0u32, 1, 9, 10, 12345] {
            assert_eq!(HeaderText::from_count(n), n.to_string().as_str());
        }
    }
}
