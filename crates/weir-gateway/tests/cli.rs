//! Gateway-only behaviour: command line, drivers.

use std::path::Path;
use std::process::Command;

use weir_e2e::harness::Gateway;
use weir_e2e::scenarios::config;
use weir_e2e::upstreams::RawUpstream;

const BIN: &str = env!("CARGO_BIN_EXE_weir-gateway");

#[test]
fn check_accepts_the_example_and_names_file_line_key_on_errors() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gateway.toml");
    let out = Command::new(BIN)
        .arg("--check")
        .arg("--config")
        .arg(&example)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("flaky") && text.contains("slow"), "{text}");

    let dir = weir_e2e::harness::scratch_dir();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[server]\nlisten = \"127.0.0.1:1\"\n\n[[upstreams]]\nname = \"a\"\nendpoints = [\"127.0.0.1:1\"]\nconnect_timeout_ms = \"soon\"\n").unwrap();
    let out = Command::new(BIN)
        .arg("--check")
        .arg("--config")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml") && err.contains(":7") && err.contains("connect_timeout_ms"),
        "{err}"
    );
}

#[test]
fn no_config_is_an_error_with_a_hint() {
    let out = Command::new(BIN).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--demo"));
}

#[test]
fn legacy_driver_proxies() {
    let up = RawUpstream::echo();
    let cfg = config(
        &[("echo", up.addr)],
        "[[routes]]\nid = \"all\"\nmatch = { path_prefix = \"/\" }\nupstream = \"echo\"\n",
    );
    let gw = Gateway::start_with(Path::new(BIN), &cfg, &["--driver", "legacy"]);
    let mut c = weir_e2e::Client::connect(gw.addr).unwrap();
    for _ in 0..3 {
        assert_eq!(c.get("/legacy", &[]).unwrap().status, 200);
    }
    assert!(gw.stderr_text().contains("legacy"), "{}", gw.stderr_text());
}

#[test]
fn demo_serves_the_seed_routes_and_prints_curl_lines() {
    use std::io::Read;
    use std::time::{Duration, Instant};
    let port = weir_e2e::harness::free_port();
    let admin = weir_e2e::harness::free_port();
    let mut child = Command::new(BIN)
        .args([
            "--demo",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--admin",
            &format!("127.0.0.1:{admin}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Stop the demo however this test ends: a panicking test once left it running (and
    // holding the demo upstream ports) for the tests after it.
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
    let _kill = Kill(child.id());
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let until = Instant::now() + Duration::from_secs(15);
    let ok = loop {
        if let Ok(mut c) = weir_e2e::Client::connect(addr) {
            break c.get("/ok", &[]).unwrap_or_else(|e| {
                let _ = Command::new("kill")
                    .args(["-KILL", &child.id().to_string()])
                    .status();
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("first request to the demo failed: {e}; its stderr:\n{err}")
            });
        }
        assert!(Instant::now() < until, "demo did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(ok.status, 200);
    let slow = weir_e2e::client::get(addr, "/slow", &[]);
    assert_eq!(slow.status, 504);
    let flaky = weir_e2e::client::get(addr, "/flaky", &["idempotency-key: demo-test"]);
    assert_eq!(
        (flaky.status, flaky.header("x-weir-attempts")),
        (200, Some("2"))
    );
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{err}");
    assert!(
        err.contains(&format!("curl -i http://127.0.0.1:{port}/ok")),
        "{err}"
    );
}

/// A reload whose `[store]` section changed attaches a new store: a gateway started against
/// a Redis URL where nothing listens (global route fails closed) serves the limit once the
/// config names a running Redis and is reloaded — no restart. `--check` never connects.
#[test]
fn reload_with_a_changed_store_attaches_it() {
    let Some(redis) = weir_e2e::redis::RedisServer::start("reload_store") else {
        return;
    };
    let up = RawUpstream::echo();
    let routes = |url: &str| {
        format!(
            "[store]\nkind = \"redis\"\nurl = \"{url}\"\ntimeout_ms = 200\n\n[[routes]]\nid = \"g\"\nmatch = {{ path_prefix = \"/\" }}\nupstream = \"echo\"\n\n[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 1\nper = \"60s\"\nburst = 1\nkey = [\"route\"]\nscope = \"global\"\non_store_error = \"deny\"\n"
        )
    };
    let dead = format!("redis://{}/0", weir_e2e::harness::dead_addr());
    let text = config(&[("echo", up.addr)], &routes(&dead));
    let gw = Gateway::start(Path::new(BIN), &text);
    let out = Command::new(BIN)
        .arg("--check")
        .arg("--config")
        .arg(&gw.config_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "--check does not need the store");
    let r = weir_e2e::client::get(gw.addr, "/x", &[]);
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.reason(), "ratelimit_store_unavailable");

    std::fs::write(
        &gw.config_path,
        config(&[("echo", up.addr)], &routes(&redis.url())),
    )
    .unwrap();
    assert_eq!(gw.admin("POST", "/admin/reload").status, 200);
    let r = weir_e2e::client::get(gw.addr, "/x", &[]);
    assert_eq!(
        r.status,
        200,
        "new store attached: {r:?}; {}",
        gw.stderr_text()
    );
    let r = weir_e2e::client::get(gw.addr, "/x", &[]);
    assert_eq!(r.status, 429, "limited by the new store: {r:?}");
    assert!(gw.stderr_text().contains("new store attached"));
}

/// `examples/weir-gateway.service` is a unit systemd accepts (`systemd-analyze verify`, with
/// `ExecStart` pointed at this build's binary, since verify checks that it exists). Skipped
/// with a message where systemd is not installed (containers, macOS).
#[test]
fn systemd_unit_verifies() {
    let Ok(v) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("systemd_unit_verifies: SKIPPED: systemd-analyze is not installed");
        return;
    };
    assert!(v.status.success());
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/weir-gateway.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(text.contains("ExecStart=/usr/local/bin/weir-gateway --config /etc/weir/gateway.toml"));
    let dir = weir_e2e::harness::scratch_dir();
    let copy = dir.path().join("weir-gateway.service");
    std::fs::write(&copy, text.replace("/usr/local/bin/weir-gateway", BIN)).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.trim().is_empty(),
        "systemd-analyze verify:\n{err}"
    );
    // A misspelt directive is what verify exists to catch: make sure it would.
    std::fs::write(
        &copy,
        text.replace("/usr/local/bin/weir-gateway", BIN)
            .replace("ProtectHome=", "ProtectHom="),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ProtectHom"),
        "verify did not flag a bad key"
    );
}
