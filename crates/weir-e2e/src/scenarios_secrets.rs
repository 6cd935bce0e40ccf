//! Secrets stay secret in a whole run (docs/HTTP.md, "Secrets"), and the access log
//! follows rotation (docs/HTTP.md, "Access log").

use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::client;
use crate::harness::Gateway;
use crate::redis::RedisServer;
use crate::scenarios::{
    ADMIN_TOKEN, JWT_SECRET, config_with, demo, hs256, jwt_identity, route, wait_for_log,
};

const REDIS_PASSWORD: &str = "e2e-redis-Pa55-test-only";
const WRONG_PASSWORD: &str = "e2e-wrong-Pa55-test-only";
const COOKIE: &str = "e2e-cookie-value-test-only";
const QUERY_TOKEN: &str = "e2e-query-token-test-only";

/// The config of [`secrets_never_reach_output`]: a JWT identity, a global limit per
/// consumer on a Redis that needs `password` (in the store URL), an admin token, and the
/// access log in `access.log` next to the config file.
fn secret_config(blue: std::net::SocketAddr, store: &str) -> String {
    let routes = format!(
        "{}{}[routes.auth]\nidentity = \"users\"\nscopes = [\"read\"]\n\n\
         [routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 100\nper = \"1s\"\nburst = 100\n\
         key = [\"consumer\"]\nscope = \"global\"\n\n\
         [store]\nkind = \"redis\"\n{store}\ntimeout_ms = 500\n\n[log]\naccess = \"access.log\"\n",
        jwt_identity(),
        route("api", "/echo", "blue"),
    );
    config_with(
        &[("blue", blue)],
        &routes,
        "admin_token_env = \"WEIR_E2E_ADMIN_TOKEN\"\n",
    )
}

/// Every output of a run — `--check`, stdout and stderr, the access log, `/metrics`,
/// `/admin/config`, the bodies of the gateway's own answers (including store failures after
/// a reload to a wrong password) — is free of every secret the run used: the Redis password
/// (in the store URL and through `password_env`), the JWT secret and the tokens, the admin
/// token, cookies and query strings.
pub fn secrets_never_reach_output(bin: &Path) {
    let test = "secrets_never_reach_output";
    let Some(redis) = RedisServer::start_with_password(test, REDIS_PASSWORD) else {
        return;
    };
    let blue = demo("blue");
    let url = |pw: &str| format!("url = \"redis://:{pw}@127.0.0.1:{}/0\"", redis.port);
    let env = [
        ("WEIR_E2E_JWT_SECRET", JWT_SECRET),
        ("WEIR_E2E_ADMIN_TOKEN", ADMIN_TOKEN),
        ("WEIR_E2E_REDIS_PASSWORD", REDIS_PASSWORD),
    ];
    let gw = Gateway::start_with_env(
        bin,
        &secret_config(blue.addr(), &url(REDIS_PASSWORD)),
        &[],
        &env,
    );
    let dir = gw.config_path.parent().unwrap().to_path_buf();
    let token = hs256("alice", "read");
    let forged = format!("{}x", hs256("mallory", "read"));
    let bearer = format!("authorization: Bearer {token}");
    let admin = format!("authorization: Bearer {ADMIN_TOKEN}");
    let cookie = format!("cookie: session={COOKIE}");
    let query = format!("/echo?token={QUERY_TOKEN}");
    let mut seen = String::new();
    for _ in 0..3 {
        let r = client::get(gw.addr, &query, &[&bearer, &cookie, "x-request-id: sec-1"]);
        assert_eq!(
            r.status, 200,
            "the global limit on the password-protected Redis: {r:?}"
        );
        let r = client::get(
            gw.addr,
            &query,
            &[&format!("authorization: Bearer {forged}")],
        );
        assert_eq!(r.status, 401, "{r:?}");
        seen.push_str(&r.text());
    }
    // A reload onto a wrong password: the new store fails and says so, without the password.
    std::fs::write(
        &gw.config_path,
        secret_config(blue.addr(), &url(WRONG_PASSWORD)),
    )
    .unwrap();
    let r = gw.admin_with("POST", "/admin/reload", &[&admin]);
    assert_eq!(r.status, 200, "{r:?}");
    seen.push_str(&r.text());
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let r = client::get(gw.addr, &query, &[&bearer, &cookie]);
        seen.push_str(&r.text());
        if r.status == 503 {
            break;
        }
        assert!(
            Instant::now() < until,
            "the wrong password never failed: {r:?}"
        );
        thread::sleep(Duration::from_millis(50));
    }
    for (m, p) in [
        ("GET", "/metrics"),
        ("GET", "/admin/config"),
        ("GET", "/admin/breakers"),
        ("GET", "/admin/bypass"),
    ] {
        let r = gw.admin_with(m, p, &[&admin]);
        assert_eq!(r.status, 200, "{m} {p}: {r:?}");
        seen.push_str(&r.text());
    }
    let config = gw.admin_with("GET", "/admin/config", &[&admin]).text();
    assert!(
        config.contains(":***@127.0.0.1"),
        "the URL is shown redacted: {config}"
    );
    // `--check` of both configs, and of one with the password in `password_env`.
    for store in [
        url(REDIS_PASSWORD),
        url(WRONG_PASSWORD),
        format!(
            "url = \"redis://127.0.0.1:{}/0\"\npassword_env = \"WEIR_E2E_REDIS_PASSWORD\"",
            redis.port
        ),
    ] {
        let path = dir.join("check.toml");
        std::fs::write(&path, secret_config(blue.addr(), &store)).unwrap();
        let out = Command::new(bin)
            .arg("--check")
            .arg("--config")
            .arg(&path)
            .envs(env)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        seen.push_str(&String::from_utf8_lossy(&out.stdout));
        seen.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    let log = wait_for_log(
        || std::fs::read_to_string(dir.join("access.log")).unwrap_or_default(),
        "sec-1",
    );
    seen.push_str(&log);
    seen.push_str(&gw.stdout_text());
    seen.push_str(&gw.stderr_text());
    assert!(seen.contains("***"), "nothing redacted was shown at all");
    for secret in [
        REDIS_PASSWORD,
        WRONG_PASSWORD,
        JWT_SECRET,
        ADMIN_TOKEN,
        token.as_str(),
        forged.as_str(),
        COOKIE,
        QUERY_TOKEN,
    ] {
        assert!(
            !seen.contains(secret),
            "{secret:?} reached an output:\n{seen}"
        );
    }
}

/// The access log is reopened on SIGUSR1 and on reload, so `mv` + signal rotates it as
/// with nginx (no copytruncate); a relative `log.access` is relative to the config file.
pub fn access_log_reopened_on_sigusr1_and_reload(bin: &Path) {
    let blue = demo("blue");
    let routes = format!(
        "{}[log]\naccess = \"access.log\"\n",
        route("ok", "/ok", "blue")
    );
    let gw = Gateway::start(bin, &config_with(&[("blue", blue.addr())], &routes, ""));
    // Relative to the config file's folder, not to the gateway's working directory.
    let dir = gw.config_path.parent().unwrap().to_path_buf();
    let live = dir.join("access.log");
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    assert_eq!(
        client::get(gw.addr, "/ok", &["x-request-id: before-1"]).status,
        200
    );
    wait_for_log(|| read(&live), "before-1");
    // Rotation by SIGUSR1.
    let rotated = dir.join("access.log.1");
    std::fs::rename(&live, &rotated).unwrap();
    gw.signal("USR1");
    let until = Instant::now() + Duration::from_secs(5);
    while !live.exists() {
        assert!(
            Instant::now() < until,
            "SIGUSR1 did not reopen the log; stderr:\n{}",
            gw.stderr_text()
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        client::get(gw.addr, "/ok", &["x-request-id: after-usr1"]).status,
        200
    );
    let text = wait_for_log(|| read(&live), "after-usr1");
    assert!(!text.contains("before-1"), "{text}");
    assert!(!read(&rotated).contains("after-usr1"));
    // Rotation by reload.
    let rotated2 = dir.join("access.log.2");
    std::fs::rename(&live, &rotated2).unwrap();
    let r = gw.admin("POST", "/admin/reload");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        client::get(gw.addr, "/ok", &["x-request-id: after-reload"]).status,
        200
    );
    wait_for_log(|| read(&live), "after-reload");
    assert!(!read(&rotated2).contains("after-reload"));
    // Nothing was dropped, and the counter says so.
    let m = gw.admin("GET", "/metrics").text();
    assert!(m.contains("weir_access_log_dropped_total 0"), "{m}");
}
