//! Shutdown under the io_uring ring set-up the workers use: SIGTERM after load must stop the
//! process promptly, every time, whatever the connections are doing when it arrives (a
//! gateway once slept through one after a paced benchmark run; see
//! docs/perf-log/2026-12-02-gateway-ring-flags-error-body.md, "Shutdown wake-up"). Bounded: a few seconds per run, a fixed number of runs.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use event_listener::Event;
use weir_e2e::Client;
use weir_e2e::harness::Gateway;
use weir_e2e::scenarios::config;
use weir_e2e::upstreams::RawUpstream;

const BIN: &str = env!("CARGO_BIN_EXE_weir-gateway");
/// Longest a stop may take with nothing in flight (the drain has nothing to wait for).
const STOP_WITHIN: Duration = Duration::from_secs(3);

/// Where the connections are when the signal arrives.
#[derive(Debug, Clone, Copy)]
enum When {
    /// Requests still being sent on every connection.
    UnderLoad,
    /// The load is over, its keep-alive connections open and idle.
    IdleKeepAlive,
    /// Every client has closed: only the accept loop waits (the case that once hung).
    AllClosed,
}

/// `conns` keep-alive clients, each sending paced `GET`s until `stop`; returns the clients
/// (still connected) and the number of 200s.
fn load(
    addr: SocketAddr,
    conns: usize,
    stop: Arc<AtomicBool>,
) -> Vec<thread::JoinHandle<(Client, u64)>> {
    (0..conns)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut c = Client::connect(addr).expect("connect");
                let mut ok = 0;
                while !stop.load(Ordering::Relaxed) {
                    if c.get("/x", &[]).is_ok_and(|r| r.status == 200) {
                        ok += 1;
                    }
                    thread::sleep(Duration::from_micros(500));
                }
                (c, ok)
            })
        })
        .collect()
}

fn stop_after_load(when: When, driver: &[&str]) {
    let up = RawUpstream::echo();
    let cfg = config(
        &[("echo", up.addr)],
        "[[routes]]\nid = \"all\"\nmatch = { path_prefix = \"/\" }\nupstream = \"echo\"\n",
    );
    let mut gw = Gateway::start_with(Path::new(BIN), &cfg, driver);
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(gw.addr, 8, stop.clone());
    thread::sleep(Duration::from_millis(300));
    let mut kept = Vec::new();
    match when {
        When::UnderLoad => gw.signal("TERM"),
        When::IdleKeepAlive | When::AllClosed => {
            stop.store(true, Ordering::Relaxed);
            for h in clients {
                let (c, ok) = h.join().expect("client");
                assert!(ok > 0, "load was served");
                kept.push(c);
            }
            if matches!(when, When::AllClosed) {
                kept.clear();
            }
            // Let the gateway see the closes and go idle before the signal.
            thread::sleep(Duration::from_millis(150));
            gw.signal("TERM");
        }
    }
    let t = Instant::now();
    let st = gw.wait_exit(STOP_WITHIN);
    stop.store(true, Ordering::Relaxed);
    let st = st.unwrap_or_else(|| {
        panic!(
            "{when:?} {driver:?}: still running {STOP_WITHIN:?} after SIGTERM; stderr:\n{}",
            gw.stderr_text()
        )
    });
    assert!(
        st.success(),
        "{when:?}: exit status {st}; {}",
        gw.stderr_text()
    );
    eprintln!("{when:?} {driver:?}: stopped in {:?}", t.elapsed());
    drop(kept);
}

#[test]
fn sigterm_after_load_stops_promptly_every_time() {
    for _ in 0..3 {
        for when in [When::AllClosed, When::IdleKeepAlive, When::UnderLoad] {
            stop_after_load(when, &[]);
        }
    }
    stop_after_load(When::AllClosed, &["--driver", "legacy"]);
}

/// A gateway restarted the moment the previous one exited binds the same port and serves:
/// the old one's listening socket must not outlive it (on io_uring the kernel tears a ring
/// down after the process is gone, and a socket the ring still references would stay in
/// `LISTEN` for some milliseconds: "address already in use" for a restart, seen in two of
/// three quick restarts in a benchmark script, and here in one of the six rounds or more
/// before the workers shut their listeners down).
#[test]
fn a_gateway_restarted_at_once_binds_the_same_port() {
    let up = RawUpstream::echo();
    let cfg = config(
        &[("echo", up.addr)],
        "[[routes]]\nid = \"all\"\nmatch = { path_prefix = \"/\" }\nupstream = \"echo\"\n",
    );
    let mut gw = Gateway::start_with(Path::new(BIN), &cfg, &[]);
    let addr = gw.addr;
    for round in 0..6 {
        let stop = Arc::new(AtomicBool::new(false));
        let clients = load(addr, 16, stop.clone());
        thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        for h in clients {
            let (_, ok) = h.join().expect("client");
            assert!(ok > 0, "round {round}: load was served");
        }
        gw.signal("TERM");
        let st = gw.wait_exit(STOP_WITHIN).expect("stopped");
        assert!(st.success(), "round {round}: exit status {st}");
        // What the restarted gateway's first step does (its probe bind), right away.
        if let Err(e) = std::net::TcpListener::bind(addr) {
            panic!("round {round}: {addr} still taken after the gateway exited: {e}");
        }
        gw = Gateway::start_at(Path::new(BIN), &cfg, addr, &[])
            .unwrap_or_else(|e| panic!("round {round}: restart on {addr} failed:\n{e}"));
    }
}

/// A gateway whose stderr reader has gone (a supervisor or terminal that went away) starts,
/// serves and stops on SIGTERM, and cleanly: its signal thread once died on the failed write of its
/// "draining" line before it could stop the workers, and no signal could end the process.
#[test]
fn sigterm_stops_a_gateway_whose_stderr_is_closed() {
    use std::process::{Command, Stdio};
    let up = RawUpstream::echo();
    let cfg = config(
        &[("echo", up.addr)],
        "[[routes]]\nid = \"all\"\nmatch = { path_prefix = \"/\" }\nupstream = \"echo\"\n",
    );
    let dir = weir_e2e::harness::scratch_dir();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, cfg).expect("write config");
    let addr = SocketAddr::from(([127, 0, 0, 1], weir_e2e::harness::free_port()));
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(&path)
        .args(["--listen", &addr.to_string(), "--workers", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start");
    // Closed before the gateway's first line, so every line it writes meets a closed pipe
    // (closing it once the port answered raced with the "listening" line).
    drop(child.stderr.take());
    let until = Instant::now() + Duration::from_secs(15);
    while Client::connect(addr).is_err() {
        assert!(Instant::now() < until, "gateway did not start");
        thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t.elapsed() > STOP_WITHIN {
            let _ = child.kill();
            panic!("still running {STOP_WITHIN:?} after SIGTERM with stderr closed");
        }
        thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status}");
}

/// The mechanism underneath: a task parked on a ring with the workers' flags (and no timer
/// due) is woken from another thread through monoio's channel + eventfd path, at random
/// points of its park, many times over; each wake must arrive within 5 s (a lost one never
/// would: nothing else can end that wait).
#[test]
fn cross_thread_wakes_reach_a_deferred_taskrun_ring() {
    struct S {
        ev: Event,
        listening: AtomicU64,
        woken: AtomicU64,
    }
    const ROUNDS: u64 = 5_000;
    let s = Arc::new(S {
        ev: Event::new(),
        listening: AtomicU64::new(0),
        woken: AtomicU64::new(0),
    });
    let w = s.clone();
    let worker = thread::spawn(move || {
        let mut urb = io_uring::IoUring::builder();
        urb.setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag();
        let Ok(mut rt) = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .uring_builder(urb)
            .build()
        else {
            eprintln!("no io_uring with DEFER_TASKRUN here: nothing to check");
            w.woken.store(ROUNDS, Ordering::Release);
            return;
        };
        rt.block_on(async {
            for i in 1..=ROUNDS {
                let l = w.ev.listen();
                w.listening.store(i, Ordering::Release);
                l.await;
                w.woken.store(i, Ordering::Release);
            }
        });
    });
    let mut rng = 0x2545_f491_u64;
    for i in 1..=ROUNDS {
        while s.listening.load(Ordering::Acquire) < i && s.woken.load(Ordering::Acquire) < ROUNDS {
            thread::yield_now();
        }
        if s.woken.load(Ordering::Acquire) >= ROUNDS {
            break;
        }
        // Notify at a random point of the worker's way into its wait (0–4 µs in).
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let t = Instant::now();
        while (t.elapsed().as_nanos() as u64) < rng % 4000 {
            std::hint::spin_loop();
        }
        s.ev.notify(usize::MAX);
        let t = Instant::now();
        while s.woken.load(Ordering::Acquire) < i {
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "wake {i} of {ROUNDS} lost"
            );
            thread::yield_now();
        }
    }
    worker.join().unwrap();
}
