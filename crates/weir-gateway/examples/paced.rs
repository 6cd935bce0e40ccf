//! A constant-rate HTTP/1.1 load client for `bench/http/cpu.sh`: latency at a fixed offered
//! rate, free of coordinated omission (what `wrk2` does; it is not packaged here).
//!
//!     paced ADDR RATE SECONDS CONNECTIONS
//!
//! Request `k` is due at `start + k / RATE`; connection `k % CONNECTIONS` sends it (keep-alive
//! `GET /`) when it is due or, if that connection is still waiting for an earlier response,
//! as soon as it is free. Its latency is measured from the time it was *due*, so a stall of
//! the server counts against every request that should have been sent during it. Prints one
//! line: `p99 p50 p99.9 max` (milliseconds), requests completed, errors, and the p99 of the
//! client's own lateness (how long after its due time a free connection woke to send, in
//! milliseconds; a connection still waiting for a response counts 0 here, that delay is the
//! server's): when it is large, the client was descheduled and the line measured the machine.
//!
//! With `PACED_TRACE=FILE` it also writes one line per request to FILE: its due time
//! (microseconds after the first request was due), latency and send lateness (microseconds),
//! to see *when* the slow requests were due (a periodic stall, a single one).
//!
//! Each connection is a thread with a blocking socket that sleeps until its next request is
//! due. An async runtime's timer would quantise the send times to its tick (monoio's wheel
//! counts whole milliseconds, which put up to 1 ms of the client's own delay into every
//! latency); `thread::sleep` wakes within the timer slack, which the client sets to 1 µs
//! (the default 50 µs put ~55 µs of the client's own lateness into the median latency).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nhost: bench\r\nuser-agent: paced\r\n\r\n";

/// What one connection measured: latencies and send lateness in microseconds, errors.
#[derive(Default)]
struct Tally {
    /// Per request: due time after the start, latency, lateness (microseconds).
    trace: Vec<(u64, u64, u64)>,
    errors: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, rate, secs, conns] = args.as_slice() else {
        eprintln!("usage: paced ADDR RATE SECONDS CONNECTIONS");
        std::process::exit(2);
    };
    let addr: SocketAddr = addr.parse().expect("ADDR");
    let rate: f64 = rate.parse().expect("RATE");
    let secs: f64 = secs.parse().expect("SECONDS");
    let conns: usize = conns.parse().expect("CONNECTIONS");
    let total = (rate * secs) as usize;
    // The 1 µs timer slack of the module docs. Set before the connection threads start:
    // they inherit it. Best effort: without the file (kernels before 4.6) the default stays.
    let _ = std::fs::write("/proc/self/timerslack_ns", "1000");
    let start = Instant::now() + Duration::from_millis(50);
    let threads: Vec<_> = (0..conns)
        .map(|c| std::thread::spawn(move || connection(addr, c, conns, total, rate, start)))
        .collect();
    let mut all = Tally::default();
    for t in threads {
        let t = t.join().expect("connection thread");
        all.trace.extend(t.trace);
        all.errors += t.errors;
    }
    if let Ok(path) = std::env::var("PACED_TRACE") {
        all.trace.sort_unstable();
        let mut text = String::with_capacity(all.trace.len() * 24);
        for (due, lat, late) in &all.trace {
            text.push_str(&format!("{due} {lat} {late}\n"));
        }
        std::fs::write(&path, text).expect("PACED_TRACE");
    }
    let mut l: Vec<u64> = all.trace.iter().map(|t| t.1).collect();
    let mut late: Vec<u64> = all.trace.iter().map(|t| t.2).collect();
    l.sort_unstable();
    late.sort_unstable();
    let q = |v: &[u64], p: f64| {
        v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
            .map_or(f64::NAN, |&us| us as f64 / 1000.0)
    };
    println!(
        "{:.3} {:.3} {:.3} {:.3} {} {} {:.3}",
        q(&l, 0.99),
        q(&l, 0.50),
        q(&l, 0.999),
        l.last().map_or(f64::NAN, |&us| us as f64 / 1000.0),
        l.len(),
        all.errors,
        q(&late, 0.99),
    );
}

/// Connection `c`: requests `c`, `c + conns`, ... each at its due time.
fn connection(
    addr: SocketAddr,
    c: usize,
    conns: usize,
    total: usize,
    rate: f64,
    start: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let Ok(mut s) = TcpStream::connect(addr) else {
        tally.errors += 1;
        return tally;
    };
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::with_capacity(4096);
    let mut k = c;
    while k < total {
        let due = start + Duration::from_secs_f64(k as f64 / rate);
        // The client's own lateness: how long after its due time a free connection woke to
        // send. A connection still busy with an earlier response sends at once; that delay
        // is the server's and stays in the latency, not here.
        let now = Instant::now();
        let late = if now < due {
            std::thread::sleep(due - now);
            due.elapsed().as_micros() as u64
        } else {
            0
        };
        if !exchange(&mut s, &mut buf) {
            tally.errors += 1;
            return tally;
        }
        let at = (due - start).as_micros() as u64;
        tally
            .trace
            .push((at, due.elapsed().as_micros() as u64, late));
        k += conns;
    }
    tally
}

/// Sends one request and reads its whole response (content-length framed). False on error.
fn exchange(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    if s.write_all(REQUEST).is_err() {
        return false;
    }
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            let len = content_length(&buf[..end]).unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return true;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn content_length(head: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(head).ok()?;
    text.split("\r\n").find_map(|l| {
        let (name, v) = l.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse().ok())
            .flatten()
    })
}
