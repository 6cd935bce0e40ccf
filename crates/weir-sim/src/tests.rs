//! The simulator against what the policies promise, in virtual time.

use super::*;

const UPSTREAM: &str = "[[upstreams]]\nname = \"up\"\nendpoints = [\"127.0.0.1:9\"]\n\n";

fn sim(routes: &str, seed: u64) -> Simulation {
    let text = format!("[server]\nlisten = \"127.0.0.1:8080\"\n\n{UPSTREAM}{routes}");
    Simulation::new(&text, "sim.toml", seed).unwrap()
}

fn route(id: &str, extra: &str) -> String {
    format!(
        "[[routes]]\nid = \"{id}\"\nmatch = {{ path_prefix = \"/{id}\" }}\nupstream = \"up\"\n\n{extra}"
    )
}

fn at(ms: &[u64], path: &str) -> Vec<SimRequest> {
    ms.iter()
        .map(|&m| SimRequest {
            t: Nanos::from_millis(m),
            path: path.into(),
            ..SimRequest::default()
        })
        .collect()
}

/// A simulation of one route `id` (with `extra` tables) whose upstream follows `spec`.
fn sim_on(id: &str, extra: &str, spec: &str) -> Simulation {
    let mut s = sim(&route(id, extra), 0);
    s.set_upstream("up", model(spec)).unwrap();
    s
}

fn model(spec: &str) -> UpstreamModel {
    UpstreamModel::parse(spec).unwrap()
}

fn outcomes(r: &[SimRecord]) -> Vec<&'static str> {
    r.iter().map(|r| r.outcome.as_str()).collect()
}

#[test]
fn token_bucket_admits_the_burst_then_the_rate() {
    let s = sim(
        &route(
            "a",
            "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 2\nper = \"1s\"\nburst = 2\nkey = [\"route\"]\n\n",
        ),
        0,
    );
    // 2 at once (the burst), then one every 500 ms refills.
    let r = s.run(&at(&[0, 0, 0, 100, 500, 600, 1000], "/a")).unwrap();
    assert_eq!(
        outcomes(&r),
        [
            "proxied",
            "proxied",
            "rate_limited",
            "rate_limited",
            "proxied",
            "rate_limited",
            "proxied"
        ]
    );
    assert_eq!(r[2].status, 429);
    assert!(r.iter().all(|x| x.route == "a"));
    assert_eq!(
        r[0].duration,
        Duration::from_millis(1),
        "default latency 1 ms"
    );
    let m = summary(&r);
    assert_eq!(m["a"]["proxied"], 4);
    assert_eq!(m["a"]["rate_limited"], 3);
    // Unsorted traces are sorted (stably) and reported in trace order.
    let mut back = at(&[1000, 0], "/a");
    back.extend(at(&[0], "/nowhere"));
    let r = s.run(&back).unwrap();
    assert_eq!(outcomes(&r), ["proxied", "proxied", "no_route"]);
    assert_eq!((r[2].route.as_str(), r[2].status), ("-", 404));
}

#[test]
fn concurrency_queue_waits_in_virtual_time() {
    let mut s = sim_on(
        "q",
        "[routes.concurrency]\nmax = 1\nqueue = 2\nqueue_timeout = \"250ms\"\n\n",
        "latency:100ms",
    );
    let r = s.run(&at(&[0, 0, 0, 0], "/q")).unwrap();
    assert_eq!(
        outcomes(&r),
        ["proxied", "proxied", "proxied", "concurrency_limited"]
    );
    let q: Vec<u64> = r.iter().map(|x| x.queue.as_millis() as u64).collect();
    assert_eq!(q, [0, 100, 200, 0]);
    let d: Vec<u64> = r.iter().map(|x| x.duration.as_millis() as u64).collect();
    assert_eq!(d, [100, 200, 300, 0]);
    // A waiter past the queue timeout.
    s.set_upstream("up", model("latency:300ms")).unwrap();
    let r = s.run(&at(&[0, 0], "/q")).unwrap();
    assert_eq!(outcomes(&r), ["proxied", "queue_timeout"]);
    assert_eq!((r[1].status, r[1].queue), (503, Duration::from_millis(250)));
}

#[test]
fn leaky_bucket_delays_pass_in_virtual_time() {
    let s = sim(
        &route(
            "l",
            "[routes.rate_limit]\nalgorithm = \"leaky_bucket\"\nrate = 10\nper = \"1s\"\nburst = 5\nkey = [\"route\"]\n\n",
        ),
        0,
    );
    let r = s.run(&at(&[0, 0, 0], "/l")).unwrap();
    assert_eq!(outcomes(&r), ["proxied"; 3]);
    let d: Vec<u64> = r.iter().map(|x| x.duration.as_millis() as u64).collect();
    // Spaced 100 ms apart (rate 10/s), plus the upstream's 1 ms.
    assert_eq!(d, [1, 101, 201]);
}

#[test]
fn retries_backoff_and_per_try_timeouts() {
    // Two slow answers then a fast one, in order.
    let mut s = sim_on(
        "r",
        "[routes.timeouts]\ntotal = \"1s\"\nper_try = \"200ms\"\n\n[routes.retry]\nmax_attempts = 3\non = [\"per_try_timeout\", \"503\"]\nbackoff = { base = \"50ms\", max = \"50ms\", jitter = \"none\" }\n\n",
        "latency:300ms|300ms|10ms",
    );
    let r = s.run(&at(&[0], "/r")).unwrap();
    assert_eq!(
        (r[0].outcome.as_str(), r[0].status, r[0].attempts),
        ("proxied", 200, 3)
    );
    // 200 + 50 + 200 + 50 + 10.
    assert_eq!(r[0].duration, Duration::from_millis(510));
    s.set_upstream("up", model("latency:300ms")).unwrap();
    let r = s.run(&at(&[0], "/r")).unwrap();
    assert_eq!(r[0].attempts, 3);
    assert_eq!(r[0].status, 504, "{r:?}");
}

#[test]
fn outage_opens_the_breaker_and_it_recovers() {
    let s = sim_on(
        "b",
        "[routes.breaker]\nfailure_on = [\"connect_failure\"]\nconsecutive_failures = 3\ncooldown = { base = \"1s\", max = \"1s\", jitter = 0.0 }\nhalf_open = { probes = 1, successes = 1 }\n\n",
        "latency:5ms,outage:1s-2s",
    );
    let ms: Vec<u64> = (0..40).map(|i| i * 100).collect();
    let r = s.run(&at(&ms, "/b")).unwrap();
    let o = outcomes(&r);
    assert!(o[..10].iter().all(|x| *x == "proxied"), "{o:?}");
    assert_eq!(&o[10..13], ["upstream_unavailable"; 3], "{o:?}");
    assert!(o[13..20].iter().all(|x| *x == "circuit_open"), "{o:?}");
    assert_eq!(o[39], "proxied", "closed again after the outage: {o:?}");
}

#[test]
fn same_seed_same_records_and_the_seed_matters() {
    let routes = route(
        "e",
        "[routes.retry]\nmax_attempts = 2\non = [\"503\"]\nbackoff = { base = \"10ms\", max = \"100ms\", jitter = \"full\" }\n\n",
    );
    let ms: Vec<u64> = (0..2000).collect();
    let run = |seed| {
        let mut s = sim(&routes, seed);
        s.set_upstream("up", model("latency:2ms,errors:0.3"))
            .unwrap();
        s.run(&at(&ms, "/e")).unwrap()
    };
    let a = run(1);
    assert_eq!(a, run(1));
    assert_ne!(a, run(2));
    let retried = a.iter().filter(|r| r.attempts == 2).count();
    assert!((400..800).contains(&retried), "{retried}");
}

#[test]
fn unknown_upstream_and_key_stand_ins() {
    let mut s = sim(
        &route(
            "k",
            "[routes.rate_limit]\nalgorithm = \"token_bucket\"\nrate = 1\nper = \"60s\"\nburst = 1\nkey = [\"header:x-user\", \"client_ip\"]\n\n",
        ),
        0,
    );
    let e = s
        .set_upstream("nope", UpstreamModel::default())
        .unwrap_err();
    assert!(e.contains("nope") && e.contains("up"), "{e}");
    let (h, ip) = s.key_stand_in("GET", "/k/x", "abc");
    assert_eq!(h, [("x-user".to_string(), "abc".to_string())]);
    assert!(ip.is_some());
    let req = |d: &str| {
        let (headers, client_ip) = s.key_stand_in("GET", "/k", d);
        SimRequest {
            path: "/k".into(),
            headers,
            client_ip,
            ..SimRequest::default()
        }
    };
    let r = s.run(&[req("a"), req("b"), req("a")]).unwrap();
    assert_eq!(outcomes(&r), ["proxied", "proxied", "rate_limited"]);
}

/// 2026-01-31T23:00:00Z: an hour before a month ends.
const JAN_31_23H: u64 = 1_769_900_400;

#[test]
fn a_simulated_month_crosses_a_quota_period() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:8080\"\n\n[quota]\ndir = {:?}\n\n{UPSTREAM}{}",
        dir.path().display().to_string(),
        route(
            "q",
            "quota = { limit = 2, period = \"month\", key = [\"route\"] }\n\n"
        )
    );
    let mut s = Simulation::new(&text, "sim.toml", 0).unwrap();
    s.start_at(core::time::Duration::from_secs(JAN_31_23H));
    let min = 60_000;
    // Three in January (the third is over the month's 2), one two hours later: February.
    let r = s.run(&at(&[0, min, 2 * min, 120 * min], "/q")).unwrap();
    assert_eq!(
        outcomes(&r),
        ["proxied", "proxied", "quota_exhausted", "proxied"]
    );
    // The same run a day earlier stays in January: the fourth is refused too.
    let dir2 = tempfile::tempdir().unwrap();
    let text2 = text.replace(
        &dir.path().display().to_string(),
        &dir2.path().display().to_string(),
    );
    let mut s2 = Simulation::new(&text2, "sim.toml", 0).unwrap();
    s2.start_at(core::time::Duration::from_secs(JAN_31_23H - 86_400));
    let r = s2.run(&at(&[0, min, 2 * min, 120 * min], "/q")).unwrap();
    assert_eq!(
        outcomes(&r),
        ["proxied", "proxied", "quota_exhausted", "quota_exhausted"]
    );
}

#[test]
fn a_simulated_hour_expires_a_token() {
    weir_policy::__set_test_env("WEIR_SIM_TEST_JWT_SECRET", "sim-test-secret");
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({"sub": "alice", "iss": "sim", "exp": JAN_31_23H + 3600}),
        &jsonwebtoken::EncodingKey::from_secret(b"sim-test-secret").unwrap(),
    )
    .unwrap();
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:8080\"\n\n\
         [[identities]]\nname = \"users\"\nkind = \"jwt\"\nsecret_env = \"WEIR_SIM_TEST_JWT_SECRET\"\nissuer = \"sim\"\n\n\
         {UPSTREAM}{}",
        route("a", "[routes.auth]\nidentity = \"users\"\n\n")
    );
    let mut s = Simulation::new(&text, "sim.toml", 0).unwrap();
    s.start_at(core::time::Duration::from_secs(JAN_31_23H));
    let min = 60_000;
    let reqs: Vec<SimRequest> = [0, 59 * min, 61 * min]
        .iter()
        .map(|&m| SimRequest {
            t: Nanos::from_millis(m),
            path: "/a".into(),
            headers: vec![("authorization".into(), format!("Bearer {token}"))],
            ..SimRequest::default()
        })
        .collect();
    let r = s.run(&reqs).unwrap();
    // Valid for the simulated hour, expired one simulated minute after it.
    assert_eq!(outcomes(&r)[..2], ["proxied", "proxied"]);
    assert_ne!(outcomes(&r)[2], "proxied", "{:?}", outcomes(&r));
    assert_eq!(r[2].status, 401);
}
