//! Which headers a response carries (docs/HTTP.md, "Evidence headers"): `[server]
//! evidence_headers` (`x-weir-instance`, `x-weir-attempts`) and `[routes.rate_limit] headers`
//! (the RateLimit fields) each switch their own headers off and nothing else: `x-request-id`
//! stays on every response, `Retry-After` on every 429, and the access log keeps the instance
//! and the attempts.

use std::path::Path;

use crate::client;
use crate::harness::{Gateway, dead_addr};
use crate::scenarios::{config_with, demo, route, token_bucket, wait_for_log};

/// One combination of the two switches, and the responses it must produce.
struct Case {
    evidence: bool,
    ratelimit: bool,
}

impl Case {
    fn check(&self, what: &str, r: &client::Resp) {
        assert!(
            r.header("x-request-id").is_some_and(|v| !v.is_empty()),
            "{what}: x-request-id: {r:?}"
        );
        let instance = r.header("x-weir-instance");
        assert_eq!(
            instance.is_some(),
            self.evidence,
            "{what}: x-weir-instance: {r:?}"
        );
        if let Some(v) = instance {
            assert_eq!(v, "e2e", "{what}: {r:?}");
        }
    }

    fn check_attempts(&self, what: &str, r: &client::Resp, n: &str) {
        let want = self.evidence.then_some(n);
        assert_eq!(
            r.header("x-weir-attempts"),
            want,
            "{what}: x-weir-attempts: {r:?}"
        );
    }

    fn check_ratelimit(&self, what: &str, r: &client::Resp) {
        for name in ["ratelimit-policy", "ratelimit"] {
            assert_eq!(
                r.header(name).is_some(),
                self.ratelimit,
                "{what}: {name}: {r:?}"
            );
        }
    }
}

/// Evidence headers off with RateLimit fields on, then the reverse: each switch removes
/// exactly its headers, on proxied responses, 429 (which keeps `Retry-After`), 404, 502 and
/// the 400 of a malformed head; the access log still names the instance and the attempts.
pub fn evidence_and_ratelimit_headers_switch_independently(bin: &Path) {
    let blue = demo("blue");
    for case in [
        Case {
            evidence: false,
            ratelimit: true,
        },
        Case {
            evidence: true,
            ratelimit: false,
        },
    ] {
        let rl_flag = if case.ratelimit {
            ""
        } else {
            "headers = false\n"
        };
        let routes = format!(
            "{}{}{}",
            route("ok", "/ok", "blue"),
            token_bucket(1, "60s", 1, rl_flag),
            route("dead", "/dead", "dead")
        );
        let server = format!("evidence_headers = {}\n", case.evidence);
        let gw = Gateway::start(
            bin,
            &config_with(
                &[("blue", blue.addr()), ("dead", dead_addr())],
                &routes,
                &server,
            ),
        );
        let r = client::get(gw.addr, "/ok", &["x-request-id: hdr-ok"]);
        assert_eq!(r.status, 200, "{r:?}");
        case.check("proxied", &r);
        case.check_attempts("proxied", &r, "1");
        case.check_ratelimit("proxied", &r);

        let r = client::get(gw.addr, "/ok", &[]);
        assert_eq!((r.status, r.reason()), (429, "rate_limited"), "{r:?}");
        case.check("429", &r);
        case.check_ratelimit("429", &r);
        assert!(
            r.header("retry-after")
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|s| (1..=60).contains(&s)),
            "429: retry-after: {r:?}"
        );

        case.check("404", &client::get(gw.addr, "/none", &[]));
        let r = client::get(gw.addr, "/dead", &[]);
        assert_eq!(r.status, 502, "{r:?}");
        case.check("502", &r);
        case.check_attempts("502", &r, "1");
        case.check(
            "400",
            &client::raw(gw.addr, b"GET / HTTP/1.1\r\nbad\r\n\r\n"),
        );

        let text = wait_for_log(|| gw.stdout_text(), "hdr-ok");
        let line = text.lines().find(|l| l.contains("hdr-ok")).expect("record");
        for field in ["\"instance\":\"e2e\"", "\"attempts\":[{\"status\":200"] {
            assert!(line.contains(field), "{field} in {line}");
        }
    }
}
