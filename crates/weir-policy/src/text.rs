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
            None => HeaderText::from_u64(u64::from(n)),
        }
    }

    /// `n` in decimal, in a buffer of the exact size, without the formatting machinery
    /// (`x-weir-budget-ms` is written per attempt; `to_string` of the `u128` that
    /// `Duration::as_millis` returns cost several hundred instructions).
    pub(crate) fn from_u64(n: u64) -> HeaderText {
        HeaderText::from(decimal(n))
    }

    /// ASCII text in one shared allocation: the value and its reference count live in one
    /// block, so the first clone allocates nothing (a `Bytes` made from a `String` allocates
    /// its shared header on the first clone). For values cloned on the request path, like
    /// the request id (sent upstream and downstream). `text` must be ASCII; anything else
    /// becomes an empty value (never the case for the callers: hex digits).
    pub(crate) fn from_ascii<const N: usize>(text: [u8; N]) -> HeaderText {
        if !text.is_ascii() {
            return HeaderText::default();
        }
        HeaderText(Bytes::from_owner(text))
    }
}

/// `n` in decimal, in a `String` of the exact size ([`push_u64`]): for header values the
/// gateway writes per response (`retry-after`, `x-weir-attempts`).
pub(crate) fn decimal(n: u64) -> String {
    let mut s = String::with_capacity(dec_len(n));
    push_u64(&mut s, n);
    s
}

/// The number of decimal digits of `n`.
pub(crate) fn dec_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |l| l as usize + 1)
}

/// Appends `n` in decimal (what `write!(s, "{n}")` does, without the formatting machinery:
/// `itoa` writes two digits per step from a table, with no UTF-8 check of the result).
pub(crate) fn push_u64(s: &mut String, n: u64) {
    s.push_str(itoa::Buffer::new().format(n));
}

/// [`push_u64`] onto bytes (a JSON body).
pub(crate) fn push_u64_bytes(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
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
        for n in [0u64, 7, 10, 99, 1000, 29_999, 123_456_789, u64::MAX] {
            assert_eq!(HeaderText::from_u64(n), n.to_string().as_str());
            assert_eq!(super::decimal(n), n.to_string());
            let mut s = String::from("x");
            super::push_u64(&mut s, n);
            assert_eq!(s, format!("x{n}"));
            let mut b = b"y".to_vec();
            super::push_u64_bytes(&mut b, n);
            assert_eq!(b, format!("y{n}").into_bytes());
            assert_eq!(super::dec_len(n), n.to_string().len());
        }
        let id = HeaderText::from_ascii(*b"0123abcd");
        assert_eq!(id, "0123abcd");
        assert_eq!(id.clone().into_bytes().as_ref(), b"0123abcd");
        assert_eq!(HeaderText::from_ascii([0xffu8, b'a']), "");
    }
}
