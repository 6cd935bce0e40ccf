//! The simulation's throughput without Python: the workload of
//! `bench/python/bench_simulation.py` (one route with a token bucket and a breaker, 10,000
//! requests/s offered against 5,000/s, upstream latency 2 ms with 1 % errors) run through
//! `weir_sim::Simulation`, timed in CPU time of the running thread, so a loaded
//! machine slows the figure only through caches and frequency.
//!
//! `cargo run --release -p weir-bench --example simulate [REQUESTS] [ROUNDS] [mixed]`
//! (default 1,000,000 and 5). `mixed`: a second route instead, for comparing builds'
//! records rather than for speed — leaky bucket with a per-client key (five
//! clients), a concurrency queue, retries with jittered backoff, per-try and total
//! timeouts, a breaker with a fallback, and an upstream with varying latency, 20 %
//! errors and an outage. Prints each round's simulated requests per CPU second and the
//! route's outcome counts and a checksum of every record (FNV-1a over each record's fields):
//! two builds that simulate alike print the same checksum. Deterministic:
//! `valgrind --tool=callgrind` on a small count gives the instructions per simulated
//! request.

use std::time::Duration;
use weir_core::Nanos;
use weir_sim::{SimRecord, SimRequest, Simulation, UpstreamModel, summary};

/// The Python benchmark's config.
const CONFIG: &str = r#"
server = { listen = "127.0.0.1:8080" }
upstreams = [{ name = "up", endpoints = ["127.0.0.1:9"] }]
routes = [{ id = "api", match = { path_prefix = "/api" }, upstream = "up",
  rate_limit = { algorithm = "token_bucket", rate = 5000, per = "1s", burst = 100, key = ["route"] },
  breaker = { failure_on = ["5xx", "connect_failure"], consecutive_failures = 5, cooldown = { base = "1s", max = "10s" } } }]
"#;

/// The `mixed` config.
const MIXED: &str = r#"
server = { listen = "127.0.0.1:8080" }
upstreams = [{ name = "up", endpoints = ["127.0.0.1:9", "127.0.0.1:10"] }]

[[routes]]
id = "mix"
match = { path_prefix = "/api" }
upstream = "up"
rate_limit = { algorithm = "leaky_bucket", rate = 1500, per = "1s", burst = 20, key = ["client_ip"] }
concurrency = { max = 8, queue = 16, queue_timeout = "5ms" }
timeouts = { total = "40ms", per_try = "12ms" }
retry = { max_attempts = 3, on = ["503", "per_try_timeout", "connect_failure"], backoff = { base = "1ms", max = "4ms", jitter = "full" } }
breaker = { failure_on = ["5xx", "connect_failure"], consecutive_failures = 5, cooldown = { base = "20ms", max = "200ms" } }
fallback = { status = 200, body = "cached" }
"#;

/// CPU time of this thread so far (Linux: the first field of `schedstat`, nanoseconds on
/// a CPU); wall time where that file is missing.
fn cpu_now(wall: std::time::Instant) -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map_or_else(|| wall.elapsed(), Duration::from_nanos)
}

/// FNV-1a over every field of every record, in order.
fn checksum(recs: &[SimRecord]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h = (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3);
        }
    };
    for r in recs {
        eat(&r.t.0.to_le_bytes());
        eat(r.route.as_bytes());
        eat(&r.status.to_le_bytes());
        eat(r.outcome.as_str().as_bytes());
        eat(&r.attempts.to_le_bytes());
        eat(&r.queue.as_nanos().to_le_bytes());
        eat(&r.duration.as_nanos().to_le_bytes());
    }
    h
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let mixed = args.next().as_deref() == Some("mixed");
    let mut sim =
        Simulation::new(if mixed { MIXED } else { CONFIG }, "bench.toml", 1).expect("valid config");
    let model = if mixed {
        UpstreamModel::parse("latency:1ms|3ms|15ms|2ms,errors:0.2,outage:500ms-900ms")
            .expect("valid model")
    } else {
        UpstreamModel {
            latency: vec![Duration::from_millis(2)],
            errors: 0.01,
            outages: Vec::new(),
        }
    };
    sim.set_upstream("up", model).expect("upstream up");
    let reqs: Vec<SimRequest> = (0..n)
        .map(|i| SimRequest {
            t: Nanos(i * 100_000),
            path: "/api".into(),
            client_ip: mixed.then(|| std::net::IpAddr::from([10, 0, 0, (i % 5) as u8])),
            ..SimRequest::default()
        })
        .collect();
    let wall = std::time::Instant::now();
    let mut rates = Vec::new();
    let mut last = None;
    for _ in 0..rounds {
        let t0 = cpu_now(wall);
        let recs = sim.run(&reqs).expect("run");
        let cpu = cpu_now(wall) - t0;
        rates.push(n as f64 / cpu.as_secs_f64());
        last = Some(recs);
    }
    if let Some(recs) = &last {
        println!("{n} requests: {:?}", summary(recs));
        println!("records checksum: {:016x}", checksum(recs));
    }
    let shown: Vec<String> = rates.iter().map(|r| format!("{:.3}", r / 1e6)).collect();
    let mut sorted = rates.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    println!(
        "M simulated requests per CPU second: median {:.3} (rounds: {})",
        median / 1e6,
        shown.join(", ")
    );
}
