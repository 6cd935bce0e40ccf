//! The client's address behind proxies (docs/CONFIG.md, `trusted_proxies`).

use std::path::Path;

use crate::client;
use crate::harness::Gateway;
use crate::scenarios::{config_with, demo, route, wait_for_log};

/// The values of header `name` the demo upstream's `/echo` saw, in order.
fn echoed(r: &client::Resp, name: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(&r.text()).expect("echo JSON");
    v["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .filter(|h| h[0].as_str().is_some_and(|n| n.eq_ignore_ascii_case(name)))
        .map(|h| h[1].as_str().unwrap_or_default().to_string())
        .collect()
}

/// With the gateway's peer (127.0.0.1) trusted, `client_ip` keys follow the address that
/// `X-Forwarded-For` / `Forwarded` name, the access log's `client` is that address, and the
/// upstream gets the list with the peer appended plus `X-Forwarded-Proto`. Without
/// `trusted_proxies` the same headers are ignored: a client cannot buy a fresh bucket by
/// sending them.
pub fn client_address_behind_trusted_proxies(bin: &Path) {
    let blue = demo("blue");
    let limited = format!(
        "{}[routes.rate_limit]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1h\"\nkey = [\"client_ip\"]\n\n\
         [log]\naccess = \"access.log\"\n",
        route("echo", "/echo", "blue")
    );
    let trusted = Gateway::start(
        bin,
        &config_with(
            &[("blue", blue.addr())],
            &limited,
            "trusted_proxies = [\"127.0.0.1/32\", \"10.0.0.0/8\"]\n",
        ),
    );
    let get = |gw: &Gateway, headers: &[&str]| client::get(gw.addr, "/echo", headers);
    let a = get(
        &trusted,
        &[
            "x-forwarded-for: 198.51.100.1, 10.1.2.3",
            "x-request-id: xff-a",
        ],
    );
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(
        echoed(&a, "x-forwarded-for"),
        ["198.51.100.1, 10.1.2.3, 127.0.0.1"],
        "the upstream gets the list with the peer appended"
    );
    assert_eq!(echoed(&a, "x-forwarded-proto"), ["http"]);
    // The same client through another trusted hop: the same bucket.
    let again = get(&trusted, &["x-forwarded-for: 198.51.100.1"]);
    assert_eq!(again.status, 429, "{again:?}");
    // Another client: its own bucket; several lines are one list; Forwarded is preferred.
    let b = get(
        &trusted,
        &[
            "x-forwarded-for: 203.0.113.5",
            "x-forwarded-for: 198.51.100.2",
        ],
    );
    assert_eq!(b.status, 200, "{b:?}");
    let c = get(
        &trusted,
        &[
            "forwarded: for=\"[2001:db8::7]:4711\";proto=http",
            "x-forwarded-for: 198.51.100.1",
        ],
    );
    assert_eq!(c.status, 200, "Forwarded names a new client: {c:?}");
    let log = wait_for_log(
        || {
            std::fs::read_to_string(trusted.config_path.with_file_name("access.log"))
                .unwrap_or_default()
        },
        "xff-a",
    );
    let line = log.lines().find(|l| l.contains("xff-a")).unwrap();
    let rec: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(rec["client"], "198.51.100.1", "{line}");

    // No trusted proxies: the peer is the client, whatever the headers say.
    let plain = Gateway::start(bin, &config_with(&[("blue", blue.addr())], &limited, ""));
    let first = get(&plain, &["x-forwarded-for: 198.51.100.1"]);
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(
        echoed(&first, "x-forwarded-for"),
        ["198.51.100.1, 127.0.0.1"]
    );
    for spoof in [
        "x-forwarded-for: 198.51.100.2",
        "forwarded: for=198.51.100.3",
    ] {
        let r = get(&plain, &[spoof]);
        assert_eq!(
            r.status, 429,
            "a spoofed {spoof:?} bought a fresh bucket: {r:?}"
        );
    }
}
