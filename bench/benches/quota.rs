//! The quota step's cost per request: one whole request through the engine (begin, admit,
//! one attempt answered 200, finish) on a route without a quota, with a local quota
//! (`sync = "1s"`: a reservation, then the record handed to the ledger's writer thread at
//! commit — the writer's own work, one `write(2)` per batch, is on another thread and not
//! in this row's time unless it competes for the core), and with `sync = "always"` (the
//! request also waits for the writer's `fdatasync`, shared by the requests queued
//! together; here a single thread, so one per request). The access log is off.
//!
//! `request/global_quota_redis` is the same request with `scope = "global"` on a
//! `redis-server` started on a free loopback port (skipped when none is installed): one
//! `EVALSHA` round trip through the store's client thread per request, the consume script
//! appending the event to the key's stream. Its `limit` is 2^52 (a global limit stays
//! below 2^53) and its keys expire with the period, so the run leaves nothing behind.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use weir_policy::{Admission, AttemptResult, Engine, Next, RequestInfo, Timer};

/// The engine's timer for a spinning executor: a sleep is over once its deadline passed
/// (a timer that is ready at once would time every store call out before Redis answers).
struct Deadline;
impl Timer for Deadline {
    async fn sleep(&self, d: Duration) {
        let until = std::time::Instant::now() + d;
        std::future::poll_fn(|cx| {
            if std::time::Instant::now() >= until {
                std::task::Poll::Ready(())
            } else {
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        })
        .await
    }
}

/// A `redis-server` for the global row, killed on drop.
struct Redis(std::process::Child, u16);

impl Redis {
    fn start() -> Option<Redis> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let r = Redis(child, port);
        for _ in 0..250 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(r);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn global_engine(dir: &std::path::Path, port: u16) -> Engine {
    let text = format!(
        "[log]\naccess = \"off\"\n[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:{port}/0\"\n\
         timeout_ms = 1000\n[[upstreams]]\nname = \"u\"\nendpoints = [\"127.0.0.1:1\"]\n\
         [[routes]]\nid = \"r\"\nmatch = {{ path_prefix = \"/\" }}\nupstream = \"u\"\n\
         [routes.quota]\nlimit = 4503599627370496\nperiod = \"month\"\nkey = [\"header:x-consumer\"]\n\
         scope = \"global\"\n[quota]\ndir = \"{}\"\nsync = \"1s\"\n",
        dir.display()
    );
    weir_redis::attach(Engine::from_toml(&text, "bench.toml").expect("bench config"))
        .expect("redis store")
}

fn engine(quota: Option<(&std::path::Path, &str)>) -> Engine {
    let mut text = String::from(
        "[log]\naccess = \"off\"\n[[upstreams]]\nname = \"u\"\nendpoints = [\"127.0.0.1:1\"]\n\
         [[routes]]\nid = \"r\"\nmatch = { path_prefix = \"/\" }\nupstream = \"u\"\n",
    );
    if let Some((dir, sync)) = quota {
        text.push_str(&format!(
            "[routes.quota]\nlimit = 1000000000000\nperiod = \"month\"\nkey = [\"header:x-consumer\"]\n\
             [quota]\ndir = \"{}\"\nsync = \"{sync}\"\n",
            dir.display()
        ));
    }
    Engine::from_toml(&text, "bench.toml").expect("bench config")
}

/// One request: `true` when it was proxied.
fn request(e: &Engine, headers: &[(&str, &str)]) -> bool {
    let req = RequestInfo {
        method: "GET",
        path: "/x",
        headers: &headers,
        client_ip: None,
        body_len: Some(0),
    };
    let mut flow = e.begin(&req);
    match weir_policy::__block_on(flow.admit(&Deadline)) {
        Admission::Proceed => {
            let _ = flow.next_attempt();
            let ok = matches!(
                flow.on_attempt(AttemptResult::Response { status: 200 }),
                Next::Forward { .. }
            );
            flow.finish(200, None);
            ok
        }
        Admission::Respond(r) => {
            flow.finish(r.status, None);
            false
        }
    }
}

fn quota(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("weir-bench-quota-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut g = c.benchmark_group("quota");
    g.throughput(Throughput::Elements(1));
    let h = [("x-consumer", "acme")];
    let redis = Redis::start();
    if redis.is_none() {
        eprintln!("quota bench: no redis-server, the global row is skipped");
    }
    let mut rows = vec![
        ("request/no_quota", engine(None)),
        (
            "request/local_quota_sync_1s",
            engine(Some((&dir.join("a"), "1s"))),
        ),
        (
            "request/local_quota_sync_always",
            engine(Some((&dir.join("b"), "always"))),
        ),
    ];
    if let Some(r) = &redis {
        rows.push((
            "request/global_quota_redis",
            global_engine(&dir.join("c"), r.1),
        ));
    }
    for (name, e) in &rows {
        assert!(request(e, &h), "{name}: the bench request must be proxied");
        g.bench_function(*name, |b| b.iter(|| black_box(request(e, black_box(&h)))));
    }
    g.finish();
    drop(rows);
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, quota);
criterion_main!(benches);
