//! A constant-rate HTTP/1.1 load client for `bench/http/cpu.sh`: latency at a fixed offered
//! rate, free of coordinated omission (what `wrk2` does; it is not packaged here).
//!
//!     paced ADDR RATE SECONDS CONNECTIONS
//!
//! Request `k` is due at `start + k / RATE`; connection `k % CONNECTIONS` sends it (keep-alive
//! `GET /`) when it is due or, if that connection is still waiting for an earlier response,
//! as soon as it is free. Its latency is measured from the time it was *due*, so a stall of
//! the server counts against every request that should have been sent during it. Prints one
//! line: `p99 p50 p99.9 max` (milliseconds), requests completed, errors.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use monoio::time::Instant;

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nhost: bench\r\nuser-agent: paced\r\n\r\n";

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
    let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
        .enable_timer()
        .build()
        .expect("runtime");
    let lat = Rc::new(RefCell::new(Vec::<u64>::with_capacity(total)));
    let errors = Rc::new(RefCell::new(0usize));
    rt.block_on(async {
        let start = Instant::now() + Duration::from_millis(50);
        let mut tasks = Vec::new();
        for c in 0..conns {
            let (lat, errors) = (lat.clone(), errors.clone());
            tasks.push(monoio::spawn(async move {
                let Ok(mut s) = TcpStream::connect_addr(addr).await else {
                    *errors.borrow_mut() += 1;
                    return;
                };
                let _ = s.set_nodelay(true);
                let mut buf = Vec::with_capacity(4096);
                let mut k = c;
                while k < total {
                    let due = start + Duration::from_secs_f64(k as f64 / rate);
                    if Instant::now() < due {
                        monoio::time::sleep_until(due).await;
                    }
                    if !exchange(&mut s, &mut buf).await {
                        *errors.borrow_mut() += 1;
                        return;
                    }
                    lat.borrow_mut().push(due.elapsed().as_micros() as u64);
                    k += conns;
                }
            }));
        }
        for t in tasks {
            t.await;
        }
    });
    let mut l = lat.take();
    l.sort_unstable();
    let q = |p: f64| {
        l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
            .map_or(f64::NAN, |&us| us as f64 / 1000.0)
    };
    println!(
        "{:.3} {:.3} {:.3} {:.3} {} {}",
        q(0.99),
        q(0.50),
        q(0.999),
        l.last().map_or(f64::NAN, |&us| us as f64 / 1000.0),
        l.len(),
        errors.take()
    );
}

/// Sends one request and reads its whole response (content-length framed). False on error.
async fn exchange(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let (r, _) = s.write_all(REQUEST).await;
    if r.is_err() {
        return false;
    }
    buf.clear();
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            let len = content_length(&buf[..end]).unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return true;
            }
        }
        let spare = core::mem::take(buf);
        let (len, cap) = (spare.len(), spare.capacity());
        let (r, b) = s.read(spare.slice_mut(len..cap)).await;
        *buf = b.into_inner();
        match r {
            Ok(0) | Err(_) => return false,
            Ok(_) => {
                if buf.capacity() - buf.len() < 1024 {
                    buf.reserve(4096);
                }
            }
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
