//! Config parsing: the example parses; each error names file, line and key.

use weir_policy::config::parse;

const BASE: &str = r#"[server]
listen = "127.0.0.1:8080"

[[upstreams]]
name = "blue"
endpoints = ["127.0.0.1:18181"]

[[routes]]
id = "ok"
match = { path_prefix = "/ok" }
upstream = "blue"
"#;

fn err(extra: &str) -> String {
    let text = format!("{BASE}{extra}");
    match parse(&text, "gateway.toml") {
        Ok(_) => panic!("expected an error for:\n{extra}"),
        Err(e) => e.to_string(),
    }
}

/// The error of `extra` starts with `prefix` (file, line, key).
#[track_caller]
fn err_starts(extra: &str, prefix: &str) -> String {
    let e = err(extra);
    assert!(e.starts_with(prefix), "{e}");
    e
}

/// `BASE` with `from` replaced by `to` fails with an error starting with `prefix`.
fn edited_err_starts((from, to): (&str, &str), prefix: &str) {
    let e = parse(&BASE.replace(from, to), "gateway.toml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with(prefix), "{e}");
}

#[test]
fn example_config_parses() {
    let text = include_str!("../../../examples/gateway.toml");
    let set = parse(text, "examples/gateway.toml").unwrap();
    let ids: Vec<&str> = set.routes.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["ok", "flaky", "slow", "orders"]);
    assert_eq!(set.server.instance, "gw-a");
    let d = set.describe();
    assert!(d.contains("route ok: GET|HEAD /ok -> blue"), "{d}");
    assert!(d.contains("token_bucket 2 per 1m, burst 2"), "{d}");
    assert!(
        d.contains("retry: none") || d.contains("retry: 2 attempts"),
        "{d}"
    );
}

#[test]
fn defaults_where_the_file_is_silent() {
    let set = parse(BASE, "g.toml").unwrap();
    let r = &set.routes[0];
    assert!(r.rate_limit.is_none() && r.concurrency.is_none());
    assert!(r.breaker.is_none() && r.fallback.is_none());
    assert_eq!(r.retry.max_attempts, 1);
    assert_eq!(r.timeouts.total.to_string(), "30s");
    assert_eq!(r.timeouts.per_try.to_string(), "30s");
    assert_eq!(set.upstreams[0].connect_timeout.as_millis(), 1000);
    assert_eq!(set.server.admin.unwrap().to_string(), "127.0.0.1:9901");
    assert_eq!(r.retry.max_replay_bytes, 65536);
}

#[test]
fn burst_zero_names_line_and_key() {
    assert_eq!(
        err(
            "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 2\nper = \"1s\"\nburst = 0\n"
        ),
        "gateway.toml:16: routes[0].rate_limit.burst: must be at least 1"
    );
}

#[test]
fn rate_zero() {
    err_starts(
        "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 0\n",
        "gateway.toml:14: routes[0].rate_limit.rate:",
    );
}

#[test]
fn unknown_key() {
    err_starts(
        "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 2\nbursty = 3\n",
        "gateway.toml:15: routes[0].rate_limit.bursty: unknown field",
    );
}

#[test]
fn unknown_top_level_key() {
    err_starts(
        "[srever]\nx = 1\n",
        "gateway.toml:12: srever: unknown field",
    );
}

#[test]
fn wrong_type() {
    err_starts(
        "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = \"two\"\n",
        "gateway.toml:14: routes[0].rate_limit.rate:",
    );
}

#[test]
fn duration_without_unit() {
    for total in ["5", "\"5\""] {
        let e = err_starts(
            &format!("[routes.timeouts]\ntotal = {total}\n"),
            "gateway.toml:13: routes[0].timeouts.total:",
        );
        assert!(e.contains("no unit"), "{e}");
    }
}

#[test]
fn per_try_above_total() {
    assert_eq!(
        err("[routes.timeouts]\ntotal = \"500ms\"\nper_try = \"1s\"\n"),
        "gateway.toml:14: routes[0].timeouts.per_try: per_try (1s) must not exceed total (500ms)"
    );
}

#[test]
fn max_attempts_zero() {
    assert_eq!(
        err("[routes.retry]\nmax_attempts = 0\n"),
        "gateway.toml:13: routes[0].retry.max_attempts: must be at least 1"
    );
}

#[test]
fn unknown_upstream() {
    edited_err_starts(
        ("upstream = \"blue\"", "upstream = \"red\""),
        "gateway.toml:11: routes[0].upstream: unknown upstream \"red\"",
    );
}

#[test]
fn unknown_algorithm() {
    err_starts(
        "[routes.rate_limit]\nalgorithm = \"magic\"\n",
        "gateway.toml:13: routes[0].rate_limit.algorithm: unknown variant",
    );
}

#[test]
fn bad_key_part() {
    err_starts(
        "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 1\nkey = [\"route\", \"cookie:x\"]\n",
        "gateway.toml:15: routes[0].rate_limit.key[1]: bad key part",
    );
}

#[test]
fn bad_jitter() {
    err_starts(
        "[routes.retry]\nbackoff = { base = \"10ms\", jitter = \"lots\" }\n",
        "gateway.toml:13: routes[0].retry.backoff.jitter: unknown variant",
    );
}

#[test]
fn bad_listen_address() {
    edited_err_starts(
        ("127.0.0.1:8080", "localhost"),
        "gateway.toml:2: server.listen: invalid address",
    );
}

#[test]
fn bad_retry_condition_and_status() {
    err_starts(
        "[routes.retry]\non = [\"503\", \"sometimes\"]\n",
        "gateway.toml:13: routes[0].retry.on[1]:",
    );
    err_starts(
        "[routes.fallback]\nstatus = 99\n",
        "gateway.toml:13: routes[0].fallback.status:",
    );
}

#[test]
fn global_scope_needs_store_and_windows_need_limit() {
    let e =
        err("[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 1\nscope = \"global\"\n");
    assert!(
        e.starts_with("gateway.toml:15: routes[0].rate_limit.scope:"),
        "{e}"
    );
    let e = err("[routes.rate_limit]\nalgorithm = \"fixed_window\"\nwindow = \"1s\"\n");
    assert!(e.contains("routes[0].rate_limit.limit: missing"), "{e}");
    err_starts(
        "[routes.rate_limit]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow = \"1s\"\nburst = 2\n",
        "gateway.toml:16: routes[0].rate_limit.burst: not used",
    );
}

#[test]
fn syntax_error_has_a_line() {
    let e = err("[routes.rate_limit\n");
    assert!(e.starts_with("gateway.toml:12: invalid TOML"), "{e}");
}

#[test]
fn missing_field_and_duplicates() {
    let e = err("[[routes]]\nid = \"ok\"\nmatch = { path_prefix = \"/x\" }\nupstream = \"blue\"\n");
    assert!(e.contains("routes[1].id: duplicate route id"), "{e}");
    let e = err("[[routes]]\nid = \"two\"\nupstream = \"blue\"\n");
    assert!(
        e.contains("routes[1]") && e.contains("missing field `match`"),
        "{e}"
    );
}

#[test]
fn breaker_needs_a_trip_condition() {
    err_starts(
        "[routes.breaker]\nfailure_on = [\"5xx\"]\n",
        "gateway.toml:12: routes[0].breaker: needs a trip condition",
    );
}

#[test]
fn core_parameter_limits_name_the_key() {
    // weir-core's constructors are checked at load time and reported like any other error.
    for (extra, needle) in [
        (
            "[routes.breaker]\nfailure_rate = 0.5\nwindow = 30\nmin_calls = 10\n",
            "routes[0].breaker.window: out of range (at most 29)",
        ),
        (
            "[routes.breaker]\nconsecutive_failures = 3\nhalf_open = { probes = 300, successes = 1 }\n",
            "routes[0].breaker.half_open.probes: out of range (at most 255)",
        ),
        (
            "[routes.breaker]\nconsecutive_failures = 70000\n",
            "routes[0].breaker.consecutive_failures: out of range",
        ),
        (
            "[routes.retry]\nbudget = { ratio = 0.2, ttl = \"500ms\" }\n",
            "routes[0].retry.budget.ttl: must be at least 1s",
        ),
        (
            "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 1\nper = \"1h\"\nburst = 4611686018427387904\n",
            "routes[0].rate_limit.burst:",
        ),
        (
            "[routes.rate_limit]\nalgorithm = \"sliding_window\"\nlimit = 100000000\nwindow = \"1s\"\n",
            "routes[0].rate_limit.limit:",
        ),
    ] {
        let e = err(extra);
        assert!(e.contains(needle), "{e}");
    }
}

#[test]
fn fuzz_entry_survives_mutations() {
    // A cheap, deterministic stand-in for the fuzzer: truncations and byte flips of the
    // example config must give errors, never panics.
    let base = std::fs::read("../../examples/gateway.toml").unwrap();
    weir_policy::fuzz_config(&base);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for n in 0..400 {
        let mut v = base.clone();
        v.truncate(base.len() * (n % 97) / 96);
        for _ in 0..(n % 5) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if !v.is_empty() {
                let i = (x as usize) % v.len();
                v[i] = b"0123456789=\"[]{}.,\n -_azs"[(x >> 32) as usize % 25];
            }
        }
        weir_policy::fuzz_config(&v);
    }
}

#[test]
fn store_cluster_errors_name_their_key() {
    let cases = [
        (
            "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1/0\"\ncluster = [\"127.0.0.1:7000\"]\n",
            "gateway.toml:15: store.cluster: use either url",
        ),
        (
            "[store]\nkind = \"redis\"\n",
            "gateway.toml:12: store.url: missing",
        ),
        (
            "[store]\nkind = \"redis\"\ncluster = []\n",
            "gateway.toml:14: store.cluster: needs at least one seed node",
        ),
        (
            "[store]\nkind = \"redis\"\ncluster = [\"127.0.0.1:7000\",\n  \"redis://127.0.0.1:7001\"]\n",
            "gateway.toml:15: store.cluster[1]: expected host:port",
        ),
    ];
    for (extra, prefix) in cases {
        err_starts(extra, prefix);
    }
    // allow_for only with on_store_error = "allow", and longer than 0.
    let rl = "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1/0\"\n[[routes]]\nid = \"g\"\nmatch = { path_prefix = \"/g\" }\nupstream = \"blue\"\n[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 1\nscope = \"global\"\n";
    err_starts(
        &format!("{rl}allow_for = \"1m\"\n"),
        "gateway.toml:23: routes[1].rate_limit.allow_for: only applies to on_store_error = \"allow\"",
    );
    err_starts(
        &format!("{rl}on_store_error = \"allow\"\nallow_for = \"0s\"\n"),
        "gateway.toml:24: routes[1].rate_limit.allow_for: must be longer than 0",
    );
    let set = parse(&format!("{BASE}{rl}on_store_error = \"allow\"\n"), "g.toml").unwrap();
    let g = set.routes[1].rate_limit.as_ref().unwrap();
    assert_eq!(
        g.allow_for.map(|d| d.0),
        Some(std::time::Duration::from_secs(300))
    );
    let set = parse(
        &format!("{BASE}[store]\nkind = \"redis\"\ncluster = [\"127.0.0.1:7000\", \"[::1]:7001\", \"redis-a.internal:7002\"]\n"),
        "g.toml",
    )
    .unwrap();
    let s = set.store.unwrap();
    assert_eq!(s.cluster.len(), 3);
    assert_eq!(s.url, "");
}

#[test]
fn response_header_switches_default_on_and_name_their_key() {
    let rl = "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 2\n";
    let on = parse(&format!("{BASE}{rl}"), "g.toml").unwrap();
    assert!(on.server.evidence_headers);
    assert!(on.routes[0].rate_limit.as_ref().unwrap().headers);
    let text = format!("{BASE}{rl}headers = false\n")
        .replace("[server]\n", "[server]\nevidence_headers = false\n");
    let off = parse(&text, "g.toml").unwrap();
    assert!(!off.server.evidence_headers);
    assert!(!off.routes[0].rate_limit.as_ref().unwrap().headers);
    err_starts(
        &format!("{rl}headers = \"no\"\n"),
        "gateway.toml:15: routes[0].rate_limit.headers:",
    );
    edited_err_starts(
        ("[server]\n", "[server]\nevidence_headers = 1\n"),
        "gateway.toml:2: server.evidence_headers:",
    );
}

#[test]
fn quota_errors_name_their_key() {
    let q = "[routes.quota]\nlimit = 10\nperiod = \"month\"\n";
    let cases = [
        (
            "[routes.quota]\nlimit = 0\nperiod = \"month\"\n",
            "gateway.toml:13: routes[0].quota.limit:",
        ),
        (
            "[routes.quota]\nlimit = 1\nperiod = \"weekly\"\n",
            "gateway.toml:14: routes[0].quota.period:",
        ),
        (
            "[routes.quota]\nlimit = 1\nperiod = \"1500ms\"\n",
            "gateway.toml:14: routes[0].quota.period:",
        ),
        (
            &format!("{q}cost = \"cookie:x\"\n"),
            "gateway.toml:15: routes[0].quota.cost:",
        ),
        (
            &format!("{q}event_id = \"idempotency-key\"\n"),
            "gateway.toml:15: routes[0].quota.event_id:",
        ),
        (
            &format!("{q}on_store_error = \"allow\"\n"),
            "gateway.toml:15: routes[0].quota.on_store_error:",
        ),
        (
            &format!("{q}key = [\"consumer\"]\n"),
            "gateway.toml:15: routes[0].quota.key[0]:",
        ),
        (
            &format!("{q}refill = 2\n"),
            "gateway.toml:15: routes[0].quota.refill:",
        ),
        (
            &format!("{q}scope = \"global\"\n"),
            "gateway.toml:15: routes[0].quota.scope:",
        ),
        (
            "[quota]\nsync = \"sometimes\"\n",
            "gateway.toml:13: quota.sync:",
        ),
        ("[quota]\nsync = \"0s\"\n", "gateway.toml:13: quota.sync:"),
        ("[quota]\ndir = \"\"\n", "gateway.toml:13: quota.dir:"),
    ];
    for (extra, prefix) in cases {
        err_starts(extra, prefix);
    }
}

#[test]
fn quota_compiles_with_defaults_and_a_dir_beside_the_file() {
    let text = format!(
        "{BASE}[routes.quota]\nlimit = 1000\nperiod = \"1h\"\nkey = [\"header:x-consumer\"]\ncost = \"header:X-Units\"\nevent_id = \"header:idempotency-key\"\nheaders = false\n[quota]\nsync = \"always\"\n"
    );
    let set = parse(&text, "/etc/weir/gateway.toml").unwrap();
    assert_eq!(set.quota.dir, std::path::Path::new("/etc/weir/weir-quota"));
    assert_eq!(set.quota.sync, weir_policy::policy::SyncPolicy::Always);
    let q = set.routes[0].quota.as_ref().unwrap();
    assert_eq!(q.cost, weir_policy::policy::Cost::Header("x-units".into()));
    assert_eq!(q.event_id.as_deref(), Some("idempotency-key"));
    assert!(!q.headers);
    let shown = set.describe();
    for want in [
        "quota: 1000 per 1h; key [header:x-consumer]; cost header:x-units",
        "quota: dir /etc/weir/weir-quota, sync always",
    ] {
        assert!(shown.contains(want), "{want}:\n{shown}");
    }
    let default = parse(
        &format!("{BASE}[routes.quota]\nlimit = 5\nperiod = \"day\"\n"),
        "g.toml",
    )
    .unwrap();
    assert_eq!(
        default.quota.sync,
        weir_policy::policy::SyncPolicy::Every(std::time::Duration::from_secs(1))
    );
    assert_eq!(
        default.routes[0].quota.as_ref().unwrap().cost,
        weir_policy::policy::Cost::Fixed(1)
    );
}

#[test]
fn global_limits_are_checked_against_the_store_at_load() {
    let store = "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1/0\"\n";
    let route = "[[routes]]\nid = \"g\"\nmatch = { path_prefix = \"/g\" }\nupstream = \"blue\"\n[routes.rate_limit]\n";
    // Too large for Redis' exact arithmetic: refused by --check, not by every request.
    err_starts(
        &format!(
            "{store}{route}algorithm = \"token_bucket\"\nrate = 1000000000\nper = \"1h\"\nburst = 1000000000\nscope = \"global\"\n"
        ),
        "gateway.toml:21: routes[1].rate_limit.rate: token_bucket too large for exact evaluation",
    );
    err_starts(
        &format!(
            "{store}{route}algorithm = \"fixed_window\"\nlimit = 1000000\nwindow = \"24h\"\nscope = \"global\"\n"
        ),
        "gateway.toml:21: routes[1].rate_limit.limit: fixed_window too large",
    );
    // The same limit locally is fine (no Lua doubles involved).
    parse(
        &format!("{BASE}{store}{route}algorithm = \"token_bucket\"\nrate = 1000000000\nper = \"1h\"\nburst = 1000000000\n"),
        "gateway.toml",
    )
    .unwrap();
    // A lease applies to token buckets only.
    let leased = "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1/0\"\nlease = 10\n";
    err_starts(
        &format!(
            "{leased}{route}algorithm = \"sliding_window\"\nlimit = 10\nwindow = \"1s\"\nscope = \"global\"\n"
        ),
        "gateway.toml:21: routes[1].rate_limit.algorithm: [store] lease = 10 applies to token buckets only",
    );
    parse(
        &format!(
            "{BASE}{leased}{route}algorithm = \"token_bucket\"\nrate = 10\nscope = \"global\"\n"
        ),
        "gateway.toml",
    )
    .unwrap();
}

#[test]
fn retry_ranges_say_the_range() {
    let route = "[[routes]]\nid = \"r\"\nmatch = { path_prefix = \"/r\" }\nupstream = \"blue\"\n[routes.retry]\n";
    let e = err_starts(
        &format!("{route}budget = {{ ratio = 2000.0 }}\n"),
        "gateway.toml:17: routes[1].retry.budget.ratio: must be a number from 0 to 1000",
    );
    assert!(!e.contains("0 or more"), "{e}");
    err_starts(
        &format!("{route}max_replay_bytes = 65537\n"),
        "gateway.toml:17: routes[1].retry.max_replay_bytes: at most 65536",
    );
    parse(
        &format!("{BASE}{route}max_replay_bytes = 65536\n"),
        "gateway.toml",
    )
    .unwrap();
}

#[test]
fn trusted_proxies_are_ranges() {
    let set = parse(
        &BASE.replace(
            "listen = \"127.0.0.1:8080\"",
            "listen = \"127.0.0.1:8080\"\ntrusted_proxies = [\"10.0.0.0/8\", \"192.168.1.7\", \"fd00::/8\"]",
        ),
        "gateway.toml",
    )
    .unwrap();
    let nets: Vec<String> = set
        .server
        .trusted_proxies
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(nets, ["10.0.0.0/8", "192.168.1.7/32", "fd00::/8"]);
    edited_err_starts(
        (
            "listen = \"127.0.0.1:8080\"",
            "listen = \"127.0.0.1:8080\"\ntrusted_proxies = [\"10.0.0.0/8\", \"10.0.0.0/33\"]",
        ),
        "gateway.toml:3: server.trusted_proxies[1]: expected an address or a CIDR range",
    );
}
