//! Request descriptors: the key a rate limit (or a quota) counts by, built from trusted,
//! bounded parts ([`KeyPart`], parsed from a section's `key = [...]` by [`key_parts`]).
//!
//! Two hashes serve two purposes. The *digest* (128-bit SipHash-2-4 with a fixed key, hex)
//! is stable across instances and restarts: it names the key in access logs and in the
//! global store (`weir:{route}:DIGEST`, which every gateway instance must compute alike)
//! without ever writing the raw key (which may be an API token) anywhere. The *table hash*
//! indexes the in-process keyed table and must be keyed, so that an attacker who picks
//! consumer ids cannot aim collisions at one probe window: it is ahash of the digest with
//! the engine's random per-process key. Deriving it from the digest costs one ahash of 16
//! bytes instead of a second SipHash pass over the key bytes; collisions of the 128-bit
//! digest are out of reach, and without the random key the digest tells nothing about the
//! table hash. ahash (well kept, no_std, already in the dependency tree) is chosen over
//! foldhash, whose documentation rules out long-running programs an attacker can observe
//! (exactly a gateway), and over SipHash-1-3 for speed (see docs/BENCHMARKS.md, keyed).

use crate::check::{Ctx, R, is_token};
use core::hash::Hasher;
use serde::{Serialize, Serializer};
use siphasher::sip128::{Hasher128, SipHasher24};
use std::net::IpAddr;

/// One part of a rate-limit descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyPart {
    /// The route id.
    Route,
    /// The request method.
    Method,
    /// A request header (name lowercased); empty = missing.
    Header(String),
    /// The client's IP address.
    ClientIp,
    /// The verified consumer (`[routes.auth]`: JWT `sub` or the API key's consumer).
    Consumer,
    /// A string claim of the verified token.
    Claim(String),
}

impl KeyPart {
    /// Whether the part needs `[routes.auth]` on its route.
    pub fn needs_auth(&self) -> bool {
        matches!(self, KeyPart::Consumer | KeyPart::Claim(_))
    }
}

impl core::fmt::Display for KeyPart {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            KeyPart::Route => f.write_str("route"),
            KeyPart::Method => f.write_str("method"),
            KeyPart::Header(h) => write!(f, "header:{h}"),
            KeyPart::ClientIp => f.write_str("client_ip"),
            KeyPart::Consumer => f.write_str("consumer"),
            KeyPart::Claim(c) => write!(f, "claim:{c}"),
        }
    }
}

impl Serialize for KeyPart {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `key = [...]` at `{k}.key` (default `["route"]`) → descriptor parts; shared by every
/// section that counts by key (`[routes.rate_limit]`, `[routes.quota]`).
pub(crate) fn key_parts(ctx: &Ctx<'_>, k: &str, key: Option<Vec<String>>) -> R<Vec<KeyPart>> {
    let key_strs = key.unwrap_or_else(|| vec!["route".to_string()]);
    if key_strs.is_empty() {
        return Err(ctx.err(format!("{k}.key"), "needs at least one part"));
    }
    let mut key = Vec::new();
    for (j, p) in key_strs.iter().enumerate() {
        let part = match p.as_str() {
            "route" => KeyPart::Route,
            "method" => KeyPart::Method,
            "client_ip" => KeyPart::ClientIp,
            "consumer" => KeyPart::Consumer,
            c if c.starts_with("claim:") && is_token(&c[6..]) => KeyPart::Claim(c[6..].to_string()),
            h if h.starts_with("header:") && is_token(&h[7..]) => {
                KeyPart::Header(h[7..].to_ascii_lowercase())
            }
            other => {
                return Err(ctx.err(
                    format!("{k}.key[{j}]"),
                    format!(
                        "bad key part {other:?}: expected route, method, client_ip, header:NAME, consumer or claim:NAME"
                    ),
                ));
            }
        };
        key.push(part);
    }
    Ok(key)
}

/// Case-insensitive request header lookup, implemented by each frontend's header map.
pub trait Headers {
    /// The first value of header `name` (given lowercase), if present.
    fn get(&self, name: &str) -> Option<&[u8]>;

    /// Every value of header `name` (given lowercase), line by line in order: list headers
    /// such as `X-Forwarded-For` may arrive as several lines that mean one list. The default
    /// gives the first value only; a frontend's header map gives every line.
    fn for_each(&self, name: &str, f: &mut dyn FnMut(&[u8])) {
        if let Some(v) = self.get(name) {
            f(v);
        }
    }

    /// The verified consumer (key part `consumer`). Only the engine's own wrapper, made
    /// after `[routes.auth]` verified the request, answers; a frontend's headers never do.
    fn consumer(&self) -> Option<&[u8]> {
        None
    }

    /// A string claim of the verified token (key part `claim:NAME`); as [`Headers::consumer`].
    fn claim(&self, _name: &str) -> Option<&[u8]> {
        None
    }
}

/// The credential of an `Authorization: Bearer <token>` header (scheme case-insensitive,
/// white space around the token trimmed; the token may be empty). The auth step and the
/// admin API's token check read it alike.
pub(crate) fn bearer_token(headers: &dyn Headers) -> Option<&str> {
    let h = core::str::from_utf8(headers.get("authorization")?).ok()?;
    let (scheme, rest) = h.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

impl Headers for [(&str, &str)] {
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_bytes())
    }
}

impl<const N: usize> Headers for [(&str, &str); N] {
    fn get(&self, name: &str) -> Option<&[u8]> {
        Headers::get(self.as_slice(), name)
    }
}

impl Headers for Vec<(String, String)> {
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_bytes())
    }
}

impl Headers for &[(String, String)] {
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_bytes())
    }
}

impl Headers for &[(&str, &str)] {
    fn get(&self, name: &str) -> Option<&[u8]> {
        Headers::get(*self, name)
    }
}

/// No headers at all.
impl Headers for () {
    fn get(&self, _name: &str) -> Option<&[u8]> {
        None
    }
}

/// Why a descriptor could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DescriptorError {
    /// A part is missing or empty and `deny_empty_key` is set.
    Empty,
    /// A part is longer than `max_key_bytes`.
    TooLong,
}

/// A built descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Descriptor {
    /// Keyed 64-bit hash for the local table.
    pub table_hash: u64,
    /// Stable 128-bit digest for logs and the global store; written as hex by
    /// [`Descriptor::digest_hex`] only where it is used (a local limit with the access log
    /// off never needs the text).
    pub digest: u128,
}

impl Descriptor {
    /// The digest as 32 lowercase hex digits (what logs and store keys show).
    pub(crate) fn digest_hex(&self) -> String {
        push_hex(String::with_capacity(32), self.digest, 32)
    }
}

/// What a keyed policy says about its descriptor: the parts, whether a missing part is an
/// error, and the longest part (the rate limit's and the quota's keys are built alike).
pub(crate) trait KeyRules {
    /// The descriptor parts, in order.
    fn parts(&self) -> &[KeyPart];
    /// A missing or empty part is [`DescriptorError::Empty`] (else it counts as "").
    fn deny_empty_key(&self) -> bool;
    /// A longer part is [`DescriptorError::TooLong`].
    fn max_key_bytes(&self) -> u64;
}

/// The digest hash's keys (`weir-dig`, `est-v1`): digests name keys in the global store
/// and in logs, so they never change.
const DIGEST_KEYS: (u64, u64) = (0x7765_6972_2d64_6967, 0x6573_742d_7631_0000);

fn digest_hasher(route: &str) -> SipHasher24 {
    let mut dh = SipHasher24::new_with_keys(DIGEST_KEYS.0, DIGEST_KEYS.1);
    dh.write(route.as_bytes());
    dh.write_u8(0xff);
    dh
}

/// The digest of a key given as its parts' raw values (the admin API's `key=A|B`): the
/// same bytes [`build`] hashes for a request with those values.
pub(crate) fn digest_of_parts<'a>(route: &str, parts: impl Iterator<Item = &'a [u8]>) -> u128 {
    let mut dh = digest_hasher(route);
    for value in parts {
        dh.write(&(value.len() as u32).to_le_bytes());
        dh.write(value);
    }
    dh.finish128().as_u128()
}

/// Bytes for a [`SipHasher24`] gathered on the stack and written in as few calls as
/// possible: the hasher's `write` costs about as much for 4 bytes as for 32 (its tail
/// handling), and a key is a handful of short pieces (route, marker, lengths, values).
/// Writing the pieces' concatenation in any split hashes the same bytes.
struct Gather {
    hasher: SipHasher24,
    buf: [u8; 64],
    len: usize,
}

impl Gather {
    fn new(hasher: SipHasher24) -> Gather {
        Gather {
            hasher,
            buf: [0; 64],
            len: 0,
        }
    }

    fn put(&mut self, b: &[u8]) {
        if self.len + b.len() > self.buf.len() {
            self.flush();
            if b.len() > self.buf.len() {
                self.hasher.write(b);
                return;
            }
        }
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }

    fn flush(&mut self) {
        self.hasher.write(&self.buf[..self.len]);
        self.len = 0;
    }

    fn finish128(mut self) -> u128 {
        self.flush();
        self.hasher.finish128().as_u128()
    }
}

/// Builds the descriptor for `rl` (the route id is part of every key's namespace).
///
/// Both hashes see the route, `0xff`, then each part as its length (`u32`, little endian)
/// followed by its bytes — length-prefixed so ("ab","c") and ("a","bc") differ. The parts
/// are gathered as they are found ([`Gather`]), which hashes the same bytes as one write
/// of the concatenation, without building it on the heap.
pub(crate) fn build(
    rl: &(impl KeyRules + ?Sized),
    route: &str,
    method: &str,
    headers: &dyn Headers,
    client_ip: Option<IpAddr>,
    table_key: (u64, u64),
) -> Result<Descriptor, DescriptorError> {
    let mut dh = Gather::new(SipHasher24::new_with_keys(DIGEST_KEYS.0, DIGEST_KEYS.1));
    dh.put(route.as_bytes());
    dh.put(&[0xff]);
    for_each_part(rl, route, method, headers, client_ip, |value| {
        dh.put(&(value.len() as u32).to_le_bytes());
        dh.put(value);
    })?;
    let digest = dh.finish128();
    Ok(Descriptor {
        table_hash: table_hash(digest, table_key),
        digest,
    })
}

/// The digest of a key that does not depend on the request — every part is `route` (a
/// route-wide limit) — or the error every request would get (`max_key_bytes` below the
/// route id's length): the same value [`build`] computes, made once per config revision
/// instead of hashing the route id per request. `None` for keys with request parts.
pub(crate) fn fixed_digest(
    rl: &(impl KeyRules + ?Sized),
    route: &str,
) -> Option<Result<u128, DescriptorError>> {
    if !rl.parts().iter().all(|p| matches!(p, KeyPart::Route)) {
        return None;
    }
    // Only `route` is read: the method, headers and address cannot change the result.
    Some(build(rl, route, "", &(), None, (0, 0)).map(|d| d.digest))
}

/// The table hash of a digest: ahash of the 128-bit digest, seeded with the engine's
/// random key (the key's 128 bits spread over ahash's four seeds).
#[inline]
pub(crate) fn table_hash(digest: u128, key: (u64, u64)) -> u64 {
    ahash::RandomState::with_seeds(
        key.0,
        key.1,
        key.0.rotate_left(32) ^ 0x243f_6a88_85a3_08d3,
        key.1.rotate_left(32) ^ 0x1319_8a2e_0370_7344,
    )
    .hash_one(digest)
}

/// Calls `f` with each key part's value, in order, or fails as the key is invalid (an
/// empty part under `deny_empty_key`, a part longer than `max_key_bytes`).
fn for_each_part(
    rl: &(impl KeyRules + ?Sized),
    route: &str,
    method: &str,
    headers: &dyn Headers,
    client_ip: Option<IpAddr>,
    mut f: impl FnMut(&[u8]),
) -> Result<(), DescriptorError> {
    let mut ip_text = String::new();
    for part in rl.parts() {
        let value: Option<&[u8]> = match part {
            KeyPart::Route => Some(route.as_bytes()),
            KeyPart::Method => Some(method.as_bytes()),
            KeyPart::Header(h) => headers.get(h),
            KeyPart::ClientIp => client_ip.map(|ip| {
                ip_text = ip.to_string();
                ip_text.as_bytes()
            }),
            KeyPart::Consumer => headers.consumer(),
            KeyPart::Claim(c) => headers.claim(c),
        };
        let value = match value {
            Some(v) if !v.is_empty() => v,
            _ if rl.deny_empty_key() => return Err(DescriptorError::Empty),
            _ => b"",
        };
        if value.len() as u64 > rl.max_key_bytes() {
            return Err(DescriptorError::TooLong);
        }
        f(value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Mode, OnStoreError, RateLimitPolicy, Scope};

    fn rl(key: Vec<KeyPart>, deny: bool) -> RateLimitPolicy {
        RateLimitPolicy {
            limit: weir_core::Limit::fixed_window(1, weir_core::Nanos::from_secs(1)).unwrap(),
            key,
            deny_empty_key: deny,
            scope: Scope::Local,
            on_store_error: OnStoreError::Deny,
            allow_for: None,
            mode: Mode::Enforce,
            max_keys: 10,
            max_key_bytes: 4,
            headers: true,
        }
    }

    /// The once-per-revision digest of a request-independent key is what `build` computes
    /// per request, errors included; keys with request parts have none.
    #[test]
    fn fixed_digest_matches_build() {
        let h = [("x-c", "abc")];
        for (key, route) in [
            (vec![KeyPart::Route], "r"),
            (vec![KeyPart::Route, KeyPart::Route], "api"),
            (vec![], "r"),
            (vec![KeyPart::Route], "toolong"),
        ] {
            let p = rl(key, true);
            let fixed = fixed_digest(&p, route).unwrap();
            let built = build(&p, route, "POST", &h, Some([10, 0, 0, 1].into()), (3, 4));
            assert_eq!(fixed, built.map(|d| d.digest), "{route}");
            if let Ok(d) = built {
                assert_eq!(table_hash(d.digest, (3, 4)), d.table_hash);
            }
        }
        for key in [
            vec![KeyPart::Route, KeyPart::Method],
            vec![KeyPart::Header("x-c".into())],
            vec![KeyPart::ClientIp],
            vec![KeyPart::Consumer],
        ] {
            assert_eq!(fixed_digest(&rl(key, false), "r"), None);
        }
    }

    #[test]
    fn parts_and_errors() {
        let p = rl(vec![KeyPart::Route, KeyPart::Header("x-c".into())], true);
        let h = [("X-C", "abc")];
        let a = build(&p, "r", "GET", &h, None, (1, 2)).unwrap();
        let b = build(&p, "r", "GET", &h, None, (1, 2)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.digest_hex().len(), 32);
        assert!(!a.digest_hex().contains("abc"));
        let other = build(&p, "r", "GET", &[("x-c", "abd")], None, (1, 2)).unwrap();
        assert_ne!(a.table_hash, other.table_hash);
        assert_ne!(a.digest, other.digest);
        // Different table key: same digest, different table hash.
        let c = build(&p, "r", "GET", &h, None, (3, 4)).unwrap();
        assert_eq!(a.digest, c.digest);
        assert_ne!(a.table_hash, c.table_hash);
        assert_eq!(
            build(&p, "r", "GET", &[("x-c", "")], None, (1, 2)),
            Err(DescriptorError::Empty)
        );
        assert_eq!(
            build(&p, "r", "GET", &(), None, (1, 2)),
            Err(DescriptorError::Empty)
        );
        assert_eq!(
            build(&p, "r", "GET", &[("x-c", "abcde")], None, (1, 2)),
            Err(DescriptorError::TooLong)
        );
        let lax = rl(vec![KeyPart::Header("x-c".into())], false);
        let e1 = build(&lax, "r", "GET", &(), None, (1, 2)).unwrap();
        let e2 = build(&lax, "r", "GET", &[("x-c", "")], None, (1, 2)).unwrap();
        assert_eq!(e1, e2);
    }

    /// The former form: the length-prefixed parts concatenated, then hashed in one write.
    /// Digests name keys in the global store and in logs, so they must never change.
    fn reference(
        rl: &RateLimitPolicy,
        route: &str,
        method: &str,
        headers: &dyn Headers,
        client_ip: Option<IpAddr>,
        table_key: (u64, u64),
    ) -> Option<(u64, u128)> {
        let mut buf: Vec<u8> = Vec::new();
        for_each_part(rl, route, method, headers, client_ip, |value| {
            buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
            buf.extend_from_slice(value);
        })
        .ok()?;
        let mut dh = SipHasher24::new_with_keys(0x7765_6972_2d64_6967, 0x6573_742d_7631_0000);
        dh.write(route.as_bytes());
        dh.write_u8(0xff);
        dh.write(&buf);
        let digest = dh.finish128().as_u128();
        Some((table_hash(digest, table_key), digest))
    }

    #[test]
    fn streamed_hashes_match_the_concatenation() {
        let mut p = rl(
            vec![
                KeyPart::Route,
                KeyPart::Header("x-c".into()),
                KeyPart::Method,
                KeyPart::ClientIp,
                KeyPart::Header("x-d".into()),
            ],
            false,
        );
        p.max_key_bytes = 256;
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        let long = "k".repeat(200);
        let hs: [&[(&str, &str)]; 4] = [
            &[],
            &[("x-c", "abc")],
            &[("x-c", "abcdefghijklmnopq"), ("x-d", "1")],
            &[("x-c", long.as_str()), ("x-d", "")],
        ];
        for h in hs {
            for route in ["r", "a-much-longer-route-name"] {
                for ip in [None, Some(ip)] {
                    let got = build(&p, route, "GET", &h, ip, (7, 9)).unwrap();
                    let want = reference(&p, route, "GET", &h, ip, (7, 9)).unwrap();
                    assert_eq!((got.table_hash, got.digest), want);
                }
            }
        }
        // A fixed input's digest, as logs and stores have seen it.
        let d = build(&p, "r", "GET", &hs[1], None, (0, 0)).unwrap();
        assert_eq!(
            d.digest_hex(),
            format!(
                "{:032x}",
                reference(&p, "r", "GET", &hs[1], None, (0, 0)).unwrap().1
            )
        );
    }

    #[test]
    fn ip_and_method() {
        let p = rl(vec![KeyPart::ClientIp, KeyPart::Method], true);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            build(&p, "r", "GET", &(), None, (0, 0)),
            Err(DescriptorError::Empty)
        );
        // "10.0.0.1" is 8 bytes > max_key_bytes 4
        assert_eq!(
            build(&p, "r", "GET", &(), Some(ip), (0, 0)),
            Err(DescriptorError::TooLong)
        );
    }
}

/// The low `N` hex digits of `v` (lowercase, zero-padded) as ASCII: what
/// `format!("{v:0N$x}")` makes, without the formatting machinery (hot path: the request id).
/// Eight digits per step ([`hex8`]): a digit per step cost ~180 instructions per request id.
pub(crate) fn hex<const N: usize>(v: u128) -> [u8; N] {
    let all = [
        hex8((v >> 96) as u32),
        hex8((v >> 64) as u32),
        hex8((v >> 32) as u32),
        hex8(v as u32),
    ];
    let mut out = [b'0'; N];
    // `N` is at most 32 for every caller; a longer array keeps its leading zeros.
    let n = N.min(32);
    out[N - n..].copy_from_slice(&all.as_flattened()[32 - n..]);
    out
}

/// The eight hex digits of `x`, most significant first: its nibbles spread one per byte,
/// then each turned into its digit at once (`'0'` plus 39 more for `a`–`f`).
fn hex8(x: u32) -> [u8; 8] {
    const LOW: u64 = 0x0f0f_0f0f_0f0f_0f0f;
    const ONES: u64 = LOW / 0x0f;
    let mut n = u64::from(x);
    n = (n | (n << 16)) & 0x0000_ffff_0000_ffff;
    n = (n | (n << 8)) & 0x00ff_00ff_00ff_00ff;
    n = (n | (n << 4)) & LOW;
    // 1 in each byte whose nibble is 10 or more.
    let letters = ((n + ONES * 6) >> 4) & ONES;
    (n + ONES * u64::from(b'0') + letters * 39).to_be_bytes()
}

/// Appends the low `digits` (at most 32) hex digits of `v` (lowercase, zero-padded) to
/// `out`: what `format!("{v:0digits$x}")` makes, in one copy ([`hex`]).
pub(crate) fn push_hex(mut out: String, v: u128, digits: u32) -> String {
    let all = hex::<32>(v);
    let digits = (digits as usize).min(all.len());
    // Only ASCII hex digits were written.
    out.push_str(core::str::from_utf8(&all[all.len() - digits..]).unwrap_or_default());
    out
}

#[cfg(test)]
mod hex_tests {
    use super::{hex, push_hex};

    proptest::proptest! {
        #[test]
        fn hex_matches_format(v: u128) {
            proptest::prop_assert_eq!(hex::<32>(v).to_vec(), format!("{v:032x}").into_bytes());
            let low = v as u64;
            proptest::prop_assert_eq!(
                hex::<16>(u128::from(low)).to_vec(),
                format!("{low:016x}").into_bytes()
            );
        }
    }

    #[test]
    fn push_hex_matches_format() {
        for v in [
            0u128,
            1,
            0xabc,
            u128::from(u64::MAX),
            u128::MAX,
            0x0123_4567_89ab_cdef,
        ] {
            assert_eq!(push_hex(String::new(), v, 32), format!("{v:032x}"));
            assert_eq!(hex::<32>(v), format!("{v:032x}").as_bytes());
            assert_eq!(hex::<7>(v), format!("{:07x}", v & 0xfff_ffff).as_bytes());
            let low = v as u64;
            assert_eq!(
                push_hex(String::new(), u128::from(low), 16),
                format!("{low:016x}")
            );
        }
    }
}
