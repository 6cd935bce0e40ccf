//! Responses the gateway makes itself, and the headers every response carries.

use crate::policy::FallbackPolicy;

/// A finished response the gateway makes itself (rejections, fallback, admin).
///
/// `headers` never include `content-length` (the frontend adds it for `body`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers to write, in order.
    pub headers: Vec<(&'static str, String)>,
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

    /// Keeps the evidence headers (`x-weir-instance`, `x-weir-attempts`) when `on`
    /// (`[server] evidence_headers`, docs/CONFIG.md), else removes them.
    pub(crate) fn with_evidence(mut self, on: bool) -> GatewayResponse {
        if !on {
            self.headers.retain(|(k, _)| !EVIDENCE.contains(k));
        }
        self
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
            headers: vec![("content-type", "application/json".to_string())],
            body,
        }
    }

    /// A plain-text response.
    pub(crate) fn text(status: u16, content_type: &str, body: String) -> GatewayResponse {
        GatewayResponse {
            status,
            headers: vec![("content-type", content_type.to_string())],
            body: body.into_bytes(),
        }
    }
}

/// The headers `[server] evidence_headers = false` leaves out: which instance answered and
/// after how many attempts. The access log records both either way.
pub(crate) const EVIDENCE: [&str; 2] = ["x-weir-instance", "x-weir-attempts"];

/// Room for the headers of an error response: the four of [`error_response`] and what a
/// flow adds (RateLimit fields, `retry-after`, a challenge), so that none of those pushes
/// grows the vector again.
const ERROR_HEADERS: usize = 10;

/// The gateway's own error response: JSON body, `x-weir-reason`, ids.
pub(crate) fn error_response(
    status: u16,
    reason: &'static str,
    route: &str,
    instance: &str,
    request_id: &str,
    extra: &[(&str, serde_json::Value)],
) -> GatewayResponse {
    let fixed = [
        ("error", reason),
        ("route", route),
        ("instance", instance),
        ("request_id", request_id),
    ];
    let mut headers = Vec::with_capacity(ERROR_HEADERS);
    headers.extend([
        ("content-type", "application/json".to_string()),
        ("x-weir-reason", reason.to_string()),
        ("x-request-id", request_id.to_string()),
        ("x-weir-instance", instance.to_string()),
    ]);
    GatewayResponse {
        status,
        headers,
        body: error_body(&fixed, extra),
    }
}

/// A value of [`error_body`]'s object.
#[derive(Clone, Copy)]
enum Val<'a> {
    Str(&'a str),
    Json(&'a serde_json::Value),
}

/// Entries of [`error_body`] sorted on the stack (more than this many go to the heap).
const BODY_ENTRIES: usize = 8;

/// The JSON object of `fixed` then `extra`, keys in order and a later key replacing an
/// earlier one — the bytes a `serde_json::Map` (a `BTreeMap`) of them prints — written
/// straight out. Building that map for every rejected request (a `String` per key and
/// value, a tree insert each, then the walk) was a quarter of the gateway's user-space
/// instructions per 429 (docs/BENCHMARKS.md, "User space per rejected request"); going
/// through serde_json's serializer for the plain strings was another ~1 200 instructions
/// (its escaper looks every byte up in a table), so strings that need no escaping are
/// copied as they are and only the others go through serde_json.
fn error_body(fixed: &[(&str, &str)], extra: &[(&str, serde_json::Value)]) -> Vec<u8> {
    let all = fixed
        .iter()
        .map(|(k, v)| (*k, Val::Str(v)))
        .chain(extra.iter().map(|(k, v)| (*k, Val::Json(v))));
    let n = fixed.len() + extra.len();
    let mut stack = [("", Val::Str("")); BODY_ENTRIES];
    let mut heap = Vec::new();
    let entries: &mut [(&str, Val<'_>)] = if n <= BODY_ENTRIES {
        for (slot, e) in stack.iter_mut().zip(all) {
            *slot = e;
        }
        &mut stack[..n]
    } else {
        heap.extend(all);
        &mut heap
    };
    // Stable: of equal keys the last inserted stays last, and is the one written.
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let room: usize = fixed.iter().map(|(k, v)| k.len() + v.len() + 6).sum();
    let mut out = Vec::with_capacity(room + 32 * extra.len() + 2);
    out.push(b'{');
    let mut first = true;
    for (i, (k, v)) in entries.iter().enumerate() {
        if entries.get(i + 1).is_some_and(|next| next.0 == *k) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        push_json_str(&mut out, k);
        out.push(b':');
        let written = match v {
            Val::Str(s) => {
                push_json_str(&mut out, s);
                Ok(())
            }
            Val::Json(j) => serde_json::to_writer(&mut out, j),
        };
        if written.is_err() {
            return Vec::new();
        }
    }
    out.push(b'}');
    out
}

/// Appends `s` as a JSON string, byte for byte as serde_json writes it: as it is when no
/// byte needs an escape (no `"`, `\` or control character below 0x20; serde_json leaves
/// everything else, non-ASCII included, unescaped), else through serde_json.
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    if !needs_json_escape(s.as_bytes()) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, s).is_err() {
        // Writing into a Vec cannot fail; keep the object well-formed all the same.
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
    instance: &str,
    request_id: &str,
) -> GatewayResponse {
    GatewayResponse {
        status: f.status,
        headers: vec![
            ("content-type", f.content_type.clone()),
            ("x-weir-degraded", reason.to_string()),
            ("x-request-id", request_id.to_string()),
            ("x-weir-instance", instance.to_string()),
        ],
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

    /// The body is byte for byte what the `serde_json::Map` it replaced printed: keys in
    /// order, extra keys among the fixed ones, a repeated key's last value, odd characters.
    #[test]
    fn error_body_matches_a_json_map() {
        let many: Vec<(&str, serde_json::Value)> = ["k5", "a", "k1", "zz", "k5", "b", "c"]
            .iter()
            .enumerate()
            .map(|(i, k)| (*k, i.into()))
            .collect();
        let cases: [(&str, &[(&str, serde_json::Value)]); 6] = [
            ("r", &[]),
            ("tab\tnul\u{0}del\u{7f}\u{1f}", &[]),
            ("r", &many),
            (
                "r/ü\"q\\",
                &[("retry_after", 3.into()), ("allowed", "x".into())],
            ),
            (
                "r",
                &[
                    ("route", "over".into()),
                    ("zeta", serde_json::json!({"b": 1, "a": [2]})),
                ],
            ),
            (
                "r",
                &[
                    ("k", 1.into()),
                    ("k", 2.into()),
                    ("error", serde_json::Value::Null),
                ],
            ),
        ];
        for (route, extra) in cases {
            let fixed = [
                ("error", "rate_limited"),
                ("route", route),
                ("instance", "gw\n"),
                ("request_id", "id-1"),
            ];
            let mut map = serde_json::Map::new();
            for (k, v) in fixed {
                map.insert(k.into(), v.into());
            }
            for (k, v) in extra {
                map.insert((*k).to_string(), v.clone());
            }
            let want = serde_json::to_vec(&serde_json::Value::Object(map)).unwrap();
            assert_eq!(
                String::from_utf8(super::error_body(&fixed, extra)).unwrap(),
                String::from_utf8(want).unwrap(),
                "{route:?} {extra:?}"
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
                super::push_json_str(&mut out, &s);
                let mut want = b"x".to_vec();
                serde_json::to_writer(&mut want, &s).unwrap();
                proptest::prop_assert_eq!(out, want);
            }
        }
    }

    #[test]
    fn error_body() {
        let r = error_response(
            429,
            "rate_limited",
            "ok",
            "gw",
            "id1",
            &[("retry_after", 3.into())],
        );
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"], "rate_limited");
        assert_eq!(v["route"], "ok");
        assert_eq!(v["instance"], "gw");
        assert_eq!(v["retry_after"], 3);
        assert_eq!(r.header("x-weir-reason"), Some("rate_limited"));
        assert_eq!(r.header("X-Request-Id"), Some("id1"));
    }
}
