//! Scenarios of config history and rollback (docs/HTTP.md, "Config history and rollback").

use std::path::Path;
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client;
use crate::harness::Gateway;
use crate::scenarios::{ADMIN_TOKEN, config, demo, read_only_admin_gateway, route, token_bucket};

fn json(r: &client::Resp) -> Value {
    serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `(revision, sha256)` of each history entry; every `loaded_at` is RFC 3339 with
/// milliseconds.
fn history(gw: &Gateway) -> Vec<(u64, String)> {
    let v = json(&gw.admin("GET", "/admin/config"));
    let list = v["history"].as_array().unwrap_or_else(|| panic!("{v}"));
    list.iter()
        .map(|e| {
            let at = e["loaded_at"].as_str().unwrap_or("");
            assert!(
                at.len() == 24 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
                "loaded_at: {e}"
            );
            (
                e["revision"].as_u64().unwrap(),
                e["sha256"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn rollback(gw: &Gateway, body: &str) -> client::Resp {
    gw.admin_body("POST", "/admin/rollback", &[], body)
}

/// A rollback makes revision 1's text live again as revision 3 (the route revision 2 added
/// is gone, the limiter's state is kept as on reload), the history lists every good
/// revision with the SHA-256 of its text, the file is not rewritten (the next reload reads
/// it); an unknown revision is 404, a bad body 400, and a revision whose key file no longer
/// parses is 400 with the live config untouched. Read-only admin refuses rollbacks.
pub fn rollback_restores_a_revision_and_keeps_state(bin: &Path) {
    let blue = demo("blue");
    let ups = [("blue", blue.addr())];
    let dir = crate::harness::scratch_dir();
    let keys = dir.path().join("keys.toml");
    let good_keys = format!(
        "[[keys]]\nconsumer = \"a\"\nsha256 = \"{}\"\n",
        sha256_hex("k")
    );
    std::fs::write(&keys, &good_keys).unwrap();
    let identity = format!(
        "[[identities]]\nname = \"partners\"\nkind = \"api_key\"\nkeys = \"{}\"\n\n",
        keys.display()
    );
    let limited = format!(
        "{}{}",
        route("ok", "/ok", "blue"),
        token_bucket(2, "60s", 2, "")
    );
    let v1 = format!("{identity}{}", config(&ups, &limited));
    let v2 = format!(
        "{identity}{}",
        config(
            &ups,
            &format!("{limited}{}", route("new", "/stats", "blue"))
        )
    );
    let gw = Gateway::start(bin, &v1);
    for i in 0..2 {
        assert_eq!(client::get(gw.addr, "/ok", &[]).status, 200, "request {i}");
    }
    std::fs::write(&gw.config_path, &v2).unwrap();
    assert_eq!(json(&gw.admin("POST", "/admin/reload"))["revision"], 2);
    assert_ne!(client::get(gw.addr, "/stats", &[]).reason(), "no_route");
    let (h1, h2) = (sha256_hex(&v1), sha256_hex(&v2));
    assert_eq!(history(&gw), [(1, h1.clone()), (2, h2.clone())]);

    let r = rollback(&gw, "{\"revision\": 1}");
    assert_eq!(r.status, 200, "{r:?}");
    let v = json(&r);
    assert_eq!(
        (&v["revision"], &v["rolled_back_to"]),
        (&3.into(), &1.into()),
        "{v}"
    );
    assert!(
        v["note"].as_str().is_some_and(|n| n.contains("reload")),
        "{v}"
    );
    assert_eq!(client::get(gw.addr, "/stats", &[]).reason(), "no_route");
    let r = client::get(gw.addr, "/ok", &[]);
    assert_eq!(
        r.status, 429,
        "the limiter's state survives the rollback: {r:?}"
    );
    assert_eq!(std::fs::read_to_string(&gw.config_path).unwrap(), v2);
    assert_eq!(history(&gw), [(1, h1.clone()), (2, h2.clone()), (3, h1)]);

    for (body, status) in [
        ("{\"revision\": 42}", 404),
        ("{\"rev\": 1}", 400),
        ("not json", 400),
    ] {
        let r = rollback(&gw, body);
        assert_eq!(r.status, status, "{body}: {r:?}");
        assert_eq!(json(&r)["revision"], 3, "{body}: {r:?}");
    }
    // Revision 2's key file no longer parses: 400 naming it, nothing changes.
    std::fs::write(&keys, "[[keys]]\nconsumer = 1\n").unwrap();
    let r = rollback(&gw, "{\"revision\": 2}");
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text().contains("keys"), "{}", r.text());
    assert_eq!(json(&gw.admin("GET", "/healthz"))["revision"], 3);
    assert_eq!(client::get(gw.addr, "/stats", &[]).reason(), "no_route");
    // The next reload reads the file (revision 2's text) again.
    std::fs::write(&keys, &good_keys).unwrap();
    assert_eq!(json(&gw.admin("POST", "/admin/reload"))["revision"], 4);
    assert_ne!(client::get(gw.addr, "/stats", &[]).reason(), "no_route");
    assert_eq!(
        history(&gw).iter().map(|e| e.0).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    drop(gw);

    let ro = read_only_admin_gateway(bin, &ups);
    let good = format!("authorization: Bearer {ADMIN_TOKEN}");
    let r = ro.admin_body("POST", "/admin/rollback", &[&good], "{\"revision\": 1}");
    assert_eq!(r.status, 405, "read-only: {r:?}");
    let r = ro.admin_body("POST", "/admin/rollback", &[], "{\"revision\": 1}");
    assert_eq!(r.status, 401, "no token: {r:?}");
}

/// `BIN simulate --config CFG --trace TRACE EXTRA...`.
fn simulate(bin: &Path, cfg: &str, trace: &Path, extra: &[&str]) -> Output {
    Command::new(bin)
        .args(["simulate", "--config", cfg, "--trace"])
        .arg(trace)
        .args(extra)
        .output()
        .expect("run simulate")
}

/// The `status` of each JSON line of a `--out` file.
fn statuses(out: &str) -> Vec<u64> {
    out.lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["status"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

/// The same paced trace through a real gateway and through `BIN simulate` (as a JSON-lines
/// trace of the send times, and as the gateway's own access log) admits the same requests
/// of a rate-limited route; the output is byte-identical for the same seed; a bad trace
/// line or config exits 1 naming the file and line.
pub fn simulate_agrees_with_the_gateway_on_admissions(bin: &Path) {
    let blue = demo("blue");
    let dir = crate::harness::scratch_dir();
    let log = dir.path().join("access.log");
    // Burst 1, one per 500 ms; requests every 200 ms: every decision is 100 ms away from
    // its boundary, far more than the pacing's jitter.
    let routes = format!(
        "{}{}[log]\naccess = {:?}\n",
        route("ok", "/ok", "blue"),
        token_bucket(2, "1s", 1, ""),
        log.display().to_string()
    );
    let gw = Gateway::start(bin, &config(&[("blue", blue.addr())], &routes));
    let start = Instant::now();
    let mut trace = String::new();
    let mut real = Vec::new();
    for k in 0..13u32 {
        let due = start + Duration::from_millis(200) * k;
        thread::sleep(due.saturating_duration_since(Instant::now()));
        let sent = start.elapsed().as_secs_f64();
        real.push(u64::from(client::get(gw.addr, "/ok", &[]).status));
        trace.push_str(&format!(
            "{{\"t\": {sent}, \"method\": \"GET\", \"path\": \"/ok\"}}\n"
        ));
    }
    assert_eq!(real.iter().filter(|s| **s == 200).count(), 5, "{real:?}");
    let until = Instant::now() + Duration::from_secs(3);
    while std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count()
        < 13
    {
        assert!(Instant::now() < until, "access log incomplete");
        thread::sleep(Duration::from_millis(50));
    }
    let cfg = gw.config_path.display().to_string();
    let trace_path = dir.path().join("trace.jsonl");
    std::fs::write(&trace_path, &trace).unwrap();
    let out = |name: &str| dir.path().join(name).display().to_string();
    for (input, o) in [(&trace_path, out("a.jsonl")), (&log, out("log.jsonl"))] {
        let r = simulate(bin, &cfg, input, &["--seed", "7", "--out", &o]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(r.status.success(), "{}: {err}", input.display());
        let table = String::from_utf8_lossy(&r.stdout);
        let row = table
            .lines()
            .find(|l| l.starts_with("ok "))
            .unwrap_or_else(|| panic!("{table}"));
        assert!(row.split_whitespace().eq(["ok", "13", "5", "8"]), "{table}");
        let got = statuses(&std::fs::read_to_string(&o).unwrap());
        assert_eq!(got, real, "{}", input.display());
    }
    // Byte for byte the same for the same seed, table and records.
    let again = simulate(
        bin,
        &cfg,
        &trace_path,
        &["--seed", "7", "--out", &out("b.jsonl")],
    );
    let first = simulate(bin, &cfg, &trace_path, &["--seed", "7"]);
    assert_eq!(again.stdout, first.stdout);
    let a = std::fs::read_to_string(out("a.jsonl")).unwrap();
    assert_eq!(a, std::fs::read_to_string(out("b.jsonl")).unwrap());
    let line: Value = serde_json::from_str(a.lines().next().unwrap()).unwrap();
    let keys: Vec<&String> = line.as_object().unwrap().keys().collect();
    let want = [
        "attempts",
        "duration_ms",
        "queue_ms",
        "reason",
        "route",
        "status",
        "t",
    ];
    assert_eq!(keys, want, "{line}");
    // Errors name the file and line; exit 1.
    let bad = dir.path().join("bad.jsonl");
    let bad_cfg = dir.path().join("bad.toml");
    std::fs::write(&bad_cfg, "[server]\nlisten = 42\n").unwrap();
    let bad_cfg = bad_cfg.display().to_string();
    for (config, text, extra, want) in [
        (
            &cfg,
            "{\"t\": 0, \"path\": \"/ok\"}\nnot json\n",
            &[][..],
            "bad.jsonl:2:",
        ),
        (
            &cfg,
            "{\"t\": 5, \"path\": \"/ok\"}\n{\"t\": 1, \"path\": \"/ok\"}\n",
            &[],
            "bad.jsonl:2: time goes back",
        ),
        (
            &cfg,
            "{\"ts\": \"2026-12-02T01:00:00.000Z\", \"route\": \"gone\", \"method\": \"GET\", \"path\": \"/x\"}\n",
            &[],
            "bad.jsonl:1: route \"gone\"",
        ),
        (&bad_cfg, "", &[], "bad.toml:2"),
        (
            &cfg,
            "",
            &["--upstream", "nope=latency:1ms"],
            "no upstream \"nope\"",
        ),
    ] {
        std::fs::write(&bad, text).unwrap();
        let r = simulate(bin, config, &bad, extra);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "{err}");
        assert!(err.contains(want), "{want}: {err}");
    }
}
