//! [`HeaderText`]: the header values the engine hands to frontends on the request path.
//!
//! Several values go out on every proxied request and are the same each time (the instance
//! name, a route's `RateLimit-Policy`, the attempt count `1`), and the request id goes out
//! twice (upstream and downstream). As `String`s each of those was a fresh allocation, a copy
//! and a free per request, and once more in a frontend whose header map keeps values as
//! [`bytes::Bytes`] (Pingora's `http::HeaderValue`). A `HeaderText` is UTF-8 text in one of
//! two forms: a `Bytes`, for values built once (static, or per config revision), cloned by a
//! reference count and taken by such frontends without a copy
//! ([`HeaderText::into_bytes`]); or, for short values made per request, the text itself
//! held in place, which costs no allocation at all.

use bytes::Bytes;

/// A header value: UTF-8 text, cheap to clone (see the module docs).
#[derive(Clone)]
pub struct HeaderText(Repr);

/// Values up to this many bytes are held in place ([`Repr::Inline`]): the request id (32
/// hex digits), a `RateLimit` field of a route id up to ~20 characters, `retry-after`,
/// `x-weir-budget-ms`.
const INLINE: usize = 40;

#[derive(Clone)]
enum Repr {
    /// Static text, or text built once per config revision and shared by reference count.
    Shared(Bytes),
    /// Short text made per request (the request id, the `RateLimit` field, `retry-after`):
    /// made, cloned and dropped without an allocation or a reference count. Held as
    /// `Bytes`, each of those cost an allocation, a free and an atomic count per clone and
    /// drop, a tenth of the gateway's user-space instructions per rejected request
    /// (docs/BENCHMARKS.md, "short header values held in place").
    Inline(Short),
}

/// Text of up to [`INLINE`] bytes, held in place. Only made from `str` (the type's
/// invariant), so its bytes are UTF-8.
#[derive(Clone, Copy)]
struct Short {
    len: u8,
    bytes: [u8; INLINE],
}

impl Short {
    /// The concatenation of `parts` (UTF-8 text each), if it fits.
    fn of<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> Option<Short> {
        let mut s = Short {
            len: 0,
            bytes: [0; INLINE],
        };
        let mut at = 0;
        for p in parts {
            s.bytes.get_mut(at..at + p.len())?.copy_from_slice(p);
            at += p.len();
        }
        s.len = at as u8;
        Some(s)
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl HeaderText {
    /// A value from static text (no allocation, ever).
    pub const fn from_static(s: &'static str) -> HeaderText {
        HeaderText(Repr::Shared(Bytes::from_static(s.as_bytes())))
    }

    /// The value as text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Only ever built from `str`/`String` (the type's invariant), so this never fails.
            Repr::Shared(b) => core::str::from_utf8(b).unwrap_or_default(),
            Repr::Inline(s) => core::str::from_utf8(s.as_bytes()).unwrap_or_default(),
        }
    }

    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Shared(b) => b,
            Repr::Inline(s) => s.as_bytes(),
        }
    }

    /// The value as `Bytes` (shares the buffer of a shared value; copies a short one).
    pub fn into_bytes(self) -> Bytes {
        match self.0 {
            Repr::Shared(b) => b,
            Repr::Inline(s) => Bytes::copy_from_slice(s.as_bytes()),
        }
    }

    /// `n` in decimal; small counts (attempt numbers) are static.
    pub(crate) fn from_count(n: u32) -> HeaderText {
        const SMALL: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
        match SMALL.get(n as usize) {
            Some(s) => HeaderText::from_static(s),
            None => HeaderText::from_u64(u64::from(n)),
        }
    }

    /// `n` in decimal, held in place, without the formatting machinery (`x-weir-budget-ms`
    /// is written per attempt; `to_string` of the `u128` that `Duration::as_millis` returns
    /// cost several hundred instructions).
    pub(crate) fn from_u64(n: u64) -> HeaderText {
        HeaderText::from_parts(&[itoa::Buffer::new().format(n)])
    }

    /// The concatenation of `parts`: held in place when short, else in one allocation of
    /// the exact size. For values built per request from known pieces (a `RateLimit` field).
    pub(crate) fn from_parts(parts: &[&str]) -> HeaderText {
        match Short::of(parts.iter().map(|p| p.as_bytes())) {
            Some(s) => HeaderText(Repr::Inline(s)),
            None => HeaderText::from(parts.concat()),
        }
    }

    /// ASCII text (the request id's hex digits), held in place when short. Anything else
    /// becomes an empty value (never the case for the callers).
    pub(crate) fn from_ascii<const N: usize>(text: [u8; N]) -> HeaderText {
        if !text.is_ascii() {
            return HeaderText::default();
        }
        match Short::of([&text[..]]) {
            Some(s) => HeaderText(Repr::Inline(s)),
            // ASCII is UTF-8.
            None => HeaderText::from(String::from_utf8(text.to_vec()).unwrap_or_default()),
        }
    }
}

impl Default for HeaderText {
    fn default() -> HeaderText {
        HeaderText::from_static("")
    }
}

impl PartialEq for HeaderText {
    fn eq(&self, other: &HeaderText) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for HeaderText {}

impl core::hash::Hash for HeaderText {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

/// Appends `n` in decimal to bytes (a JSON body): `itoa` writes two digits per step from
/// a table, with no formatting machinery.
pub(crate) fn push_u64_bytes(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

impl From<String> for HeaderText {
    /// Takes the string's buffer (no copy).
    fn from(s: String) -> HeaderText {
        HeaderText(Repr::Shared(Bytes::from(s)))
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
        self.as_bytes()
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
            let mut b = b"y".to_vec();
            super::push_u64_bytes(&mut b, n);
            assert_eq!(b, format!("y{n}").into_bytes());
        }
        let id = HeaderText::from_ascii(*b"0123abcd");
        assert_eq!(id, "0123abcd");
        assert_eq!(id.clone().into_bytes().as_ref(), b"0123abcd");
        assert_eq!(HeaderText::from_ascii([0xffu8, b'a']), "");
    }

    /// A value held in place and the same text shared are one value to every reader:
    /// equal, hashed alike, the same bytes out; a value too long to be held in place is
    /// kept whole.
    #[test]
    fn short_and_shared_values_agree() {
        use std::hash::{BuildHasher, RandomState};
        let hasher = RandomState::new();
        for text in ["", "1", "\"all\";r=0;t=16", &"x".repeat(super::INLINE)] {
            let short = HeaderText::from_parts(&[text]);
            assert!(matches!(short.0, super::Repr::Inline(_)), "{text:?}");
            let shared = HeaderText::from(text.to_string());
            assert_eq!(short, shared);
            assert_eq!(hasher.hash_one(&short), hasher.hash_one(&shared));
            assert_eq!(short.as_str(), text);
            assert_eq!(short.clone().into_bytes().as_ref(), text.as_bytes());
        }
        let long = "y".repeat(super::INLINE + 1);
        let t = HeaderText::from_parts(&[&long[..3], &long[3..]]);
        assert!(matches!(t.0, super::Repr::Shared(_)));
        assert_eq!(t, long.as_str());
        assert_eq!(HeaderText::from_parts(&["a", "", "bc"]), "abc");
    }
}
