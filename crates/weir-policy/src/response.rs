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

    /// A JSON response.
    pub(crate) fn json(status: u16, v: &serde_json::Value) -> GatewayResponse {
        GatewayResponse {
            status,
            headers: vec![("content-type", "application/json".to_string())],
            body: serde_json::to_vec(v).unwrap_or_default(),
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

/// The gateway's own error response: JSON body, `x-weir-reason`, ids.
pub(crate) fn error_response(
    status: u16,
    reason: &'static str,
    route: &str,
    instance: &str,
    request_id: &str,
    extra: &[(&str, serde_json::Value)],
) -> GatewayResponse {
    let mut body = serde_json::Map::new();
    body.insert("error".into(), reason.into());
    body.insert("route".into(), route.into());
    body.insert("instance".into(), instance.into());
    body.insert("request_id".into(), request_id.into());
    for (k, v) in extra {
        body.insert((*k).to_string(), v.clone());
    }
    let mut r = GatewayResponse::json(status, &serde_json::Value::Object(body));
    r.headers.push(("x-weir-reason", reason.to_string()));
    r.headers.push(("x-request-id", request_id.to_string()));
    r.headers.push(("x-weir-instance", instance.to_string()));
    r
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
