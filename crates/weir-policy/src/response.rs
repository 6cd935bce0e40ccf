//! Responses the gateway makes itself, and the headers every response carries.

use crate::text::HeaderText;
use serde::Serialize;

/// `[routes.fallback]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FallbackPolicy {
    /// Status of the degraded response.
    pub status: u16,
    /// Its content type.
    pub content_type: String,
    /// Its body.
    pub body: String,
}

/// A finished response the gateway makes itself (rejections, fallback, admin).
///
/// `headers` never include `content-length` (the frontend adds it for `body`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers to write, in order. Values are [`HeaderText`]: the ones every response of a
    /// kind shares (content type, reason, instance, `RateLimit-Policy`) are static or
    /// prepared once per config revision and go out without an allocation or a copy.
    pub headers: Vec<(&'static str, HeaderText)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// Admin answers have the same shape.
pub type SimpleResponse = GatewayResponse;

impl GatewayResponse {
    /// The first value of a header (names are stored lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A response of `status` alone: what a simulation's engine answers
    /// ([`Shared::bare`](crate::runtime::Shared)), whose frontend reads nothing else.
    pub(crate) fn bare(status: u16) -> GatewayResponse {
        GatewayResponse {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A JSON response.
    pub(crate) fn json(status: u16, v: &serde_json::Value) -> GatewayResponse {
        Self::json_bytes(status, serde_json::to_vec(v).unwrap_or_default())
    }

    /// A response with an already serialised JSON body.
    fn json_bytes(status: u16, body: Vec<u8>) -> GatewayResponse {
        GatewayResponse {
            status,
            headers: vec![("content-type", HeaderText::from_static("application/json"))],
            body,
        }
    }

    /// A plain-text response.
    pub(crate) fn text(status: u16, content_type: &'static str, body: String) -> GatewayResponse {
        GatewayResponse {
            status,
            headers: vec![("content-type", HeaderText::from_static(content_type))],
            body: body.into_bytes(),
        }
    }
}

/// Room for the headers of an error response: the four of [`error_response`] and what a
/// flow adds (RateLimit fields, `retry-after`, a challenge), so that none of those pushes
/// grows the vector again.
const ERROR_HEADERS: usize = 10;

/// What names a gateway error in its headers and body. The route and instance are also
/// given as JSON strings (quotes included), escaped once per config revision
/// ([`json_string`]), so that a rejection copies them instead of checking every byte again.
#[derive(Clone, Copy)]
pub(crate) struct ErrorIds<'a> {
    /// The route id as a JSON string ([`NO_ROUTE_JSON`] without a route).
    pub route_json: &'a str,
    /// `x-weir-instance`; `None` leaves the header out (`[server] evidence_headers = false`).
    pub instance: Option<&'a HeaderText>,
    /// The instance name as a JSON string.
    pub instance_json: &'a str,
    /// `x-request-id`.
    pub request_id: &'a HeaderText,
}

/// The route of a response made before a route was found, as a JSON string.
pub(crate) const NO_ROUTE_JSON: &str = "\"-\"";

/// The gateway's own error response: JSON body, `x-weir-reason`, ids, and `retry_after`
/// in the body when the client is told when to come back.
///
/// Every 429 of a route is this response with a different request id (and retry time), so
/// nothing here is built that could be shared: the content type and reason are static, the
/// instance a clone of the revision's value, the body copied from prepared JSON
/// (docs/BENCHMARKS.md, "the 429 from prepared parts").
pub(crate) fn error_response(
    status: u16,
    reason: &'static str,
    ids: ErrorIds<'_>,
    retry_after: Option<u64>,
) -> GatewayResponse {
    let mut headers = Vec::with_capacity(ERROR_HEADERS);
    headers.extend([
        ("content-type", HeaderText::from_static("application/json")),
        ("x-weir-reason", HeaderText::from_static(reason)),
        ("x-request-id", ids.request_id.clone()),
    ]);
    if let Some(i) = ids.instance {
        headers.push(("x-weir-instance", i.clone()));
    }
    GatewayResponse {
        status,
        headers,
        body: error_body(reason, ids, retry_after),
    }
}

/// The error object, keys in order (what a `serde_json::Map`, a `BTreeMap`, of them
/// prints): `error`, `instance`, `request_id`, `retry_after` when given, `route`. Written
/// straight out: building that map for every rejected request (a `String` per key and
/// value, a tree insert each, then the walk) was a quarter of the gateway's user-space
/// instructions per 429 (docs/BENCHMARKS.md, "User space per rejected request"). Only the
/// reason and the request id (which a client may send) are checked for escapes here.
fn error_body(reason: &str, ids: ErrorIds<'_>, retry_after: Option<u64>) -> Vec<u8> {
    let rid = ids.request_id.as_bytes();
    // The keys, punctuation and quotes take 64 bytes, `retry_after` up to 20 digits more:
    // room for all of it, so the body is never moved while it is written.
    let mut out = Vec::with_capacity(
        96 + reason.len() + ids.instance_json.len() + rid.len() + ids.route_json.len(),
    );
    out.extend_from_slice(b"{\"error\":");
    push_json_str(&mut out, reason.as_bytes());
    out.extend_from_slice(b",\"instance\":");
    out.extend_from_slice(ids.instance_json.as_bytes());
    out.extend_from_slice(b",\"request_id\":");
    push_json_str(&mut out, rid);
    if let Some(t) = retry_after {
        out.extend_from_slice(b",\"retry_after\":");
        crate::text::push_u64_bytes(&mut out, t);
    }
    out.extend_from_slice(b",\"route\":");
    out.extend_from_slice(ids.route_json.as_bytes());
    out.push(b'}');
    out
}

/// `s` as a JSON string, quotes included, as serde_json writes it: for the parts of an
/// error body that are the same for every response of a config revision.
pub(crate) fn json_string(s: &str) -> Box<str> {
    let mut out = Vec::with_capacity(s.len() + 2);
    push_json_str(&mut out, s.as_bytes());
    // JSON text made from a `str` is UTF-8.
    String::from_utf8(out).unwrap_or_default().into_boxed_str()
}

/// Appends the UTF-8 text `s` as a JSON string, byte for byte as serde_json writes it: as
/// it is when no byte needs an escape (no `"`, `\` or control character below 0x20;
/// serde_json leaves everything else, non-ASCII included, unescaped), else through
/// serde_json. Taking bytes spares the request id ([`HeaderText`], UTF-8 by construction) a
/// UTF-8 check on the usual path.
fn push_json_str(out: &mut Vec<u8>, s: &[u8]) {
    if !needs_json_escape(s) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s);
        out.push(b'"');
    } else if core::str::from_utf8(s)
        .map_err(|_| ())
        .and_then(|s| serde_json::to_writer(&mut *out, s).map_err(|_| ()))
        .is_err()
    {
        // Not text, or (never: the writer is a Vec) a write error: keep the object
        // well-formed all the same.
        out.extend_from_slice(b"\"\"");
    }
}

/// Whether a byte of `s` is `"`, `\` or below 0x20, eight bytes at a time (a byte loop
/// cost ~9 instructions a byte, about what serde_json's escaper costs): Bit Twiddling
/// Hacks' "word has a byte less than n", on each word and on it XORed with the two
/// characters (a byte equal to c becomes 0, below 1). The last word is padded with `a`.
fn needs_json_escape(s: &[u8]) -> bool {
    const ONES: u64 = u64::MAX / 255;
    let less = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & (ONES * 0x80);
    let test = |x: u64| {
        less(x, 0x20)
            | less(x ^ (ONES * u64::from(b'"')), 1)
            | less(x ^ (ONES * u64::from(b'\\')), 1)
    };
    let mut words = s.chunks_exact(8);
    let mut hit = 0;
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        hit |= test(u64::from_le_bytes(b));
    }
    let mut b = [b'a'; 8];
    b[..words.remainder().len()].copy_from_slice(words.remainder());
    hit |= test(u64::from_le_bytes(b));
    hit != 0
}

/// The configured degraded response, marked with why it was used.
pub(crate) fn fallback_response(
    f: &FallbackPolicy,
    reason: &'static str,
    instance: Option<&HeaderText>,
    request_id: &HeaderText,
) -> GatewayResponse {
    let mut headers = vec![
        ("content-type", HeaderText::from(f.content_type.clone())),
        ("x-weir-degraded", HeaderText::from_static(reason)),
        ("x-request-id", request_id.clone()),
    ];
    if let Some(i) = instance {
        headers.push(("x-weir-instance", i.clone()));
    }
    GatewayResponse {
        status: f.status,
        headers,
        body: f.body.clone().into_bytes(),
    }
}

/// A request id from the client is kept when it is 1..=128 visible ASCII characters.
pub(crate) fn acceptable_request_id(v: &[u8]) -> Option<&str> {
    if !v.is_empty() && v.len() <= 128 && v.iter().all(|b| (0x21..=0x7e).contains(b)) {
        core::str::from_utf8(v).ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids() {
        assert_eq!(acceptable_request_id(b"abc-1"), Some("abc-1"));
        assert_eq!(acceptable_request_id(b""), None);
        assert_eq!(acceptable_request_id(b"a b"), None);
        assert_eq!(acceptable_request_id(&[b'a'; 129]), None);
        assert!(acceptable_request_id(&[b'a'; 128]).is_some());
        assert_eq!(acceptable_request_id("é".as_bytes()), None);
    }

    /// The body is byte for byte what a `serde_json::Map` of its entries prints (what the
    /// gateway wrote before the body was made from prepared parts), odd characters and the
    /// optional `retry_after` included.
    #[test]
    fn error_body_matches_a_json_map() {
        let odd = "r/\u{fc}\"q\\tab\tnul\u{0}del\u{7f}\u{1f}";
        for (route, instance, rid, retry) in [
            ("r", "gw", "id-1", None),
            ("r", "gw", "id-1", Some(3)),
            (odd, "gw\n", "a\"b\\c", Some(0)),
            ("-", odd, "x", Some(u64::MAX)),
        ] {
            let (route_json, instance_json) = (json_string(route), json_string(instance));
            let rid = HeaderText::from(rid.to_string());
            let ids = ErrorIds {
                route_json: &route_json,
                instance: None,
                instance_json: &instance_json,
                request_id: &rid,
            };
            let mut map = serde_json::Map::new();
            map.insert("error".into(), "rate_limited".into());
            map.insert("route".into(), route.into());
            map.insert("instance".into(), instance.into());
            map.insert("request_id".into(), rid.as_str().into());
            if let Some(t) = retry {
                map.insert("retry_after".into(), t.into());
            }
            let want = serde_json::to_vec(&serde_json::Value::Object(map)).unwrap();
            assert_eq!(
                String::from_utf8(super::error_body("rate_limited", ids, retry)).unwrap(),
                String::from_utf8(want).unwrap(),
                "{route:?} {instance:?} {retry:?}"
            );
        }
    }

    proptest::proptest! {
        /// The copied fast path writes what serde_json writes, for any string.
        #[test]
        fn json_strings_match_serde_json(
            s in ".{0,24}",
            clean in 0usize..24,
            odd in proptest::collection::vec(0u8..0x80, 0..3),
        ) {
            // Clean text with a few drawn ASCII bytes at the end, so each odd byte is
            // also met alone, at every offset within a word.
            let mut ascii = "x".repeat(clean);
            ascii.push_str(&String::from_utf8(odd).unwrap());
            for s in [s, ascii] {
                let mut out = b"x".to_vec();
                super::push_json_str(&mut out, s.as_bytes());
                let mut want = b"x".to_vec();
                serde_json::to_writer(&mut want, &s).unwrap();
                proptest::prop_assert_eq!(out, want);
            }
        }
    }

    #[test]
    fn error_body() {
        let rid = HeaderText::from_static("id1");
        let instance = HeaderText::from_static("gw");
        let ids = ErrorIds {
            route_json: "\"ok\"",
            instance: Some(&instance),
            instance_json: "\"gw\"",
            request_id: &rid,
        };
        let r = error_response(429, "rate_limited", ids, Some(3));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"], "rate_limited");
        assert_eq!(v["route"], "ok");
        assert_eq!(v["instance"], "gw");
        assert_eq!(v["request_id"], "id1");
        assert_eq!(v["retry_after"], 3);
        assert_eq!(r.header("x-weir-reason"), Some("rate_limited"));
        assert_eq!(r.header("X-Request-Id"), Some("id1"));
        assert_eq!(r.header("x-weir-instance"), Some("gw"));
        let quiet = error_response(
            503,
            "x",
            ErrorIds {
                instance: None,
                ..ids
            },
            None,
        );
        assert_eq!(quiet.header("x-weir-instance"), None);
        let v: serde_json::Value = serde_json::from_slice(&quiet.body).unwrap();
        assert_eq!(v.get("retry_after"), None);
        assert_eq!(v["instance"], "gw");
    }
}
