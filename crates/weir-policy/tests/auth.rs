//! Identity through the whole engine: auth runs first and a failure consumes nothing,
//! per-consumer limits by the verified subject, the forwarded identity replaces a forged
//! one, metrics and the access log never carry a credential, reload re-reads key files,
//! and the admin API's token and read-only mode.

use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::json;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use weir_policy::config::writer::{ConfigText, JwtKeys};
use weir_policy::*;

mod common;

struct NoWait;
impl Timer for NoWait {
    async fn sleep(&self, _d: Duration) {}
}

const SECRET: &str = "engine-test-secret-only";
const ADMIN: &str = "admin-test-token-only";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn token(sub: &str, scope: &str) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        &json!({"sub": sub, "exp": now() + 600, "scope": scope, "iss": "test-issuer"}),
        &EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap()
}

fn config(log: &str, extra_server: &str) -> String {
    ConfigText::new()
        .table("server")
        .set("instance", "gw")
        .raw(extra_server)
        .log(log)
        .jwt("users", JwtKeys::SecretEnv("WEIR_TEST_ENGINE_SECRET"))
        .set("issuer", "test-issuer")
        .upstream("u", "127.0.0.1:1")
        .route("api", "/api", "u")
        .auth("users", &["read"])
        .rate_limit("fixed_window")
        .set("limit", 1)
        .set("window", "1h")
        .set("key", &["consumer"])
        .table("routes.concurrency")
        .set("max", 1)
        .route("open", "/open", "u")
        .render()
}

fn engine(log: &str, extra_server: &str) -> Engine {
    __set_test_env("WEIR_TEST_ENGINE_SECRET", SECRET);
    __set_test_env("WEIR_TEST_ADMIN_TOKEN", ADMIN);
    Engine::from_toml(&config(log, extra_server), "auth.toml").unwrap()
}

/// One request; `Ok(upstream request headers)` when admitted (the attempt is completed
/// with a 200), `Err(response)` when the engine answered itself.
fn call(
    e: &Engine,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Vec<(&'static str, String)>, GatewayResponse> {
    let req = RequestInfo {
        method: "GET",
        path,
        headers: &headers,
        client_ip: None,
        body_len: Some(0),
    };
    let mut flow = e.begin(&req);
    match __block_on(flow.admit(&NoWait)) {
        Admission::Proceed => {
            let a = flow.next_attempt().unwrap();
            let hs = a
                .request_headers
                .iter()
                .map(|(k, v)| (*k, v.to_string()))
                .collect();
            let _ = flow.on_attempt(AttemptResult::Response { status: 200 });
            flow.finish(200, None);
            Ok(hs)
        }
        Admission::Respond(r) => {
            let s = r.status;
            flow.finish(s, None);
            Err(r)
        }
    }
}

fn reason(r: &GatewayResponse) -> (u16, &str) {
    (r.status, r.header("x-weir-reason").unwrap_or(""))
}

#[test]
fn auth_first_failures_consume_nothing_and_limits_follow_the_verified_consumer() {
    let (_dir, log) = common::scratch_log("auth-e");
    let e = engine(&log.display().to_string(), "");
    let alice = format!("Bearer {}", token("alice", "read"));
    let bob = format!("Bearer {}", token("bob", "read write"));
    let noscope = token("carol", "write");
    let bad = format!("{}x", token("alice", "read"));

    // Failures of every kind, many times: 401/403 with their challenges, nothing spent.
    for _ in 0..5 {
        // One refused call: its status and reason, and its challenge.
        let refused = |headers: &[(&str, &str)], want: (u16, &str), challenge: &str| {
            let r = call(&e, "/api/x", headers).unwrap_err();
            assert_eq!(reason(&r), want);
            assert_eq!(r.header("www-authenticate"), Some(challenge));
            r
        };
        refused(&[], (401, "unauthenticated"), "Bearer");
        let auth = format!("Bearer {bad}");
        let invalid = "Bearer error=\"invalid_token\"";
        let r = refused(&[("authorization", &auth)], (401, "invalid_token"), invalid);
        assert!(!String::from_utf8_lossy(&r.body).contains(&bad));
        let auth = format!("Bearer {noscope}");
        let scope = "Bearer error=\"insufficient_scope\", scope=\"read\"";
        let r = refused(
            &[("authorization", &auth)],
            (403, "insufficient_scope"),
            scope,
        );
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["error"], "insufficient_scope");
    }
    // The first valid request of each consumer passes (limit 1 per consumer), with the
    // verified subject forwarded in place of the forged one.
    let up = call(
        &e,
        "/api/x?token=secret-query",
        &[("authorization", &alice), ("x-weir-consumer", "bob")],
    )
    .unwrap();
    let fwd: Vec<&str> = up
        .iter()
        .filter(|(k, _)| *k == "x-weir-consumer")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(fwd, ["alice"]);
    // A forged consumer header does not buy a fresh bucket: alice is limited.
    let r = call(
        &e,
        "/api/x",
        &[("authorization", &alice), ("x-weir-consumer", "mallory")],
    )
    .unwrap_err();
    assert_eq!(reason(&r), (429, "rate_limited"));
    assert!(call(&e, "/api/x", &[("authorization", &bob)]).is_ok());
    // Routes without auth are untouched: a client header goes through as sent.
    let up = call(&e, "/open", &[("x-weir-consumer", "bob")]).unwrap();
    assert!(!up.iter().any(|(k, _)| *k == "x-weir-consumer"));

    let m = e.metrics_text();
    assert!(m.contains("# TYPE weir_auth_total counter"));
    for (result, n) in [
        ("ok", 3),
        ("missing", 5),
        ("invalid_token", 5),
        ("insufficient_scope", 5),
    ] {
        let line = format!("weir_auth_total{{route=\"api\",result=\"{result}\"}} {n}");
        assert!(m.contains(&line), "{line}\n{m}");
    }
    e.flush_access_log();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 15 + 3 + 1);
    let digests: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["consumer_digest"].as_str())
        .collect();
    assert_eq!(digests.len(), 3);
    assert_eq!(digests[0], digests[1]);
    assert_ne!(digests[0], digests[2]);
    // No credential, subject or query string anywhere in any output.
    for out in [&text, &m] {
        for secret in [
            alice.trim_start_matches("Bearer "),
            bob.trim_start_matches("Bearer "),
            &noscope,
            &bad,
            SECRET,
            "secret-query",
            "Bearer",
            "alice",
            "mallory",
        ] {
            assert!(!out.contains(secret), "{secret} in output");
        }
    }
}

#[test]
fn reload_re_reads_key_files_and_a_bad_file_keeps_the_old_keys() {
    let (dir, _) = common::scratch_log("auth-r");
    let keys = dir.path().join("keys.toml");
    let digest = |k: &str| {
        use std::fmt::Write;
        let d = <sha2::Sha256 as sha2::Digest>::digest(k.as_bytes());
        d.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    };
    let write = |consumer: &str, key: &str| {
        std::fs::write(
            &keys,
            format!(
                "[[keys]]\nconsumer = \"{consumer}\"\nsha256 = \"{}\"\n",
                digest(key)
            ),
        )
        .unwrap()
    };
    write("team-a", "old-key");
    let cfg = dir.path().join("gw.toml");
    let text = ConfigText::new()
        .log("off")
        .api_keys("keys", "keys.toml")
        .upstream("u", "127.0.0.1:1")
        .route("r", "/", "u")
        .auth("keys", &[])
        .render();
    std::fs::write(&cfg, text).unwrap();
    let e = Engine::load(&cfg).unwrap();
    assert!(call(&e, "/", &[("x-api-key", "old-key")]).is_ok());
    let r = call(&e, "/", &[("x-api-key", "new-key")]).unwrap_err();
    assert_eq!(reason(&r), (401, "invalid_api_key"));
    assert!(r.header("www-authenticate").is_some());
    // A key file that does not parse: the reload fails (400 on the admin API) naming the
    // key; the old keys keep working.
    std::fs::write(&keys, "[[keys]]\nconsumer = 1\n").unwrap();
    let resp = e.admin("POST", "/admin/reload");
    assert_eq!(resp.status, 400);
    let body = String::from_utf8_lossy(&resp.body).to_string();
    assert!(body.contains("identities[0].keys: cannot parse"), "{body}");
    assert_eq!(e.revision(), 1);
    assert!(call(&e, "/", &[("x-api-key", "old-key")]).is_ok());
    // A good new file: the new key works, the old one no longer does.
    write("team-b", "new-key");
    assert_eq!(e.reload().unwrap(), 2);
    assert!(call(&e, "/", &[("x-api-key", "new-key")]).is_ok());
    let r = call(&e, "/", &[("x-api-key", "old-key")]).unwrap_err();
    assert_eq!(reason(&r), (401, "invalid_api_key"));
}

#[test]
fn admin_token_and_read_only() {
    let e = engine("off", "admin_token_env = \"WEIR_TEST_ADMIN_TOKEN\"");
    assert_eq!(e.admin("GET", "/healthz").status, 200);
    for (m, p) in [
        ("GET", "/metrics"),
        ("GET", "/admin/config"),
        ("POST", "/admin/reload"),
        ("GET", "/nope"),
    ] {
        let r = e.admin(m, p);
        assert_eq!(r.status, 401, "{m} {p}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        let wrong = e.admin_with(m, p, &[("authorization", "Bearer wrong")]);
        assert_eq!(wrong.status, 401);
    }
    let good = format!("Bearer {ADMIN}");
    let h = [("authorization", good.as_str())];
    assert_eq!(e.admin_with("GET", "/metrics", &h).status, 200);
    let cfg = e.admin_with("GET", "/admin/config", &h);
    assert_eq!(cfg.status, 200);
    let shown = String::from_utf8_lossy(&cfg.body).to_string();
    assert!(!shown.contains(ADMIN) && !shown.contains(SECRET));
    assert!(shown.contains("WEIR_TEST_ADMIN_TOKEN"));
    assert_eq!(e.admin_with("POST", "/admin/reload", &h).status, 200);

    let ro = engine("off", "admin_read_only = true");
    assert_eq!(ro.admin("POST", "/admin/reload").status, 405);
    assert_eq!(ro.admin("POST", "/metrics").status, 405);
    assert_eq!(ro.admin("GET", "/metrics").status, 200);
    assert_eq!(ro.revision(), 1);
}

#[test]
fn non_loopback_admin_needs_a_token() {
    __set_test_env("WEIR_TEST_ENGINE_SECRET", SECRET);
    __set_test_env("WEIR_TEST_ADMIN_TOKEN", ADMIN);
    let e = Engine::from_toml(&config("off", "admin = \"0.0.0.0:9901\""), "auth.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("auth.toml:4: server.admin: 0.0.0.0:9901 is not a loopback"),
        "{e}"
    );
    assert!(
        Engine::from_toml(
            &config(
                "off",
                "admin = \"0.0.0.0:9901\"\nadmin_token_env = \"WEIR_TEST_ADMIN_TOKEN\""
            ),
            "auth.toml"
        )
        .is_ok()
    );
    // The CLI override cannot open it either.
    let ok = Engine::from_toml(&config("off", ""), "auth.toml").unwrap();
    let o = Overrides {
        admin: Some("0.0.0.0:9901".into()),
        ..Overrides::default()
    };
    assert!(ok.try_with_overrides(o).is_err());
    let e = Engine::from_toml(
        &config("off", "admin_token_env = \"WEIR_TEST_UNSET_VAR\""),
        "auth.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("server.admin_token_env: environment variable"),
        "{e}"
    );
}
