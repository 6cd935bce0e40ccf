//! The floor of the gateway's design for `bench/http/cpu.sh`: a server that answers every
//! request head with a fixed response of the gateway's 429's size, and does nothing else (no
//! parsing beyond finding the end of each head, no policy, no timers, no allocation per
//! request). Its CPU per request is what the rejection path of a gateway built on it costs at
//! least: what is left is the kernel's TCP exchange and the io_uring operations.
//!
//!     floor [--raw] ADDR
//!     floor [--raw] --config weir.toml     (the `listen` address of a gateway config)
//!
//! It runs `WEIR_WORKERS` threads (default 1), each with its own ring and listener, as the
//! gateway runs its workers.
//!
//! - Default: the gateway's own stack. monoio on io_uring with the same ring set-up
//!   (`SINGLE_ISSUER` + `DEFER_TASKRUN`), the same `SO_REUSEPORT` listener and the same
//!   multishot receive as a weir-gateway worker; one task per connection.
//! - `--raw`: io_uring with nothing between, and every saving it offers taken: one
//!   multishot accept into the ring's fixed-file table (no `fget`/`fput` per operation),
//!   one multishot receive per connection over a registered buffer ring, and each answer
//!   sent from a static buffer with its success completion skipped (`CQE_SKIP_SUCCESS`),
//!   so a request costs one completion and one submission. The floor of io_uring itself.
//!   (A static buffer is what makes the skipped completion safe; a gateway's answers vary.
//!   A short send would go unnoticed too: 370-byte answers never fill a loopback socket's
//!   buffer in these benchmarks, but a real server could not skip that completion.)
//!
//! Build it with `cargo build --release -p weir-bench --example floor` and run it beside the
//! gateway and nginx, in the same rounds, with
//! `ALSO="floor=$PWD/target/release/examples/floor" bench/http/cpu.sh ...`; read its reject
//! rows only (it answers the proxy path with the same 429). For `--raw`, give `ALSO` a
//! two-line script that runs `floor --raw "$@"`. docs/perf-log/2026-12-07-gateway-floor.md
//! has what it measured.

use std::net::SocketAddr;

use monoio::io::AsyncWriteRentExt;
use monoio::net::{TcpListener, TcpStream};

/// weir-gateway's 429 from the bench config, byte for byte in size (370 bytes).
const RESPONSE: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\n\
content-type: application/json\r\n\
x-weir-reason: rate_limited\r\n\
x-request-id: f007c4c12cbb7141e18e3a97ab3b1a69\r\n\
x-weir-instance: bench\r\n\
ratelimit-policy: \"all\";q=1;w=60\r\n\
ratelimit: \"all\";r=0;t=60\r\n\
retry-after: 60\r\n\
content-length: 122\r\n\
\r\n\
{\"error\":\"rate_limited\",\"instance\":\"bench\",\"request_id\":\"f007c4c12cbb7141e18e3a97ab3b1a69\",\"retry_after\":60,\"route\":\"all\"}";

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let raw = args.get(1).is_some_and(|a| a == "--raw");
    if raw {
        args.remove(1);
    }
    let addr = listen_addr(&args).unwrap_or_else(|e| {
        eprintln!("floor: {e}");
        std::process::exit(2)
    });
    // One thread per worker, each with its own ring and `SO_REUSEPORT` listener, as the
    // gateway's workers (`WEIR_WORKERS`, which bench/http/cpu.sh sets; default 1).
    let workers = std::env::var("WEIR_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            let listener = listener(addr);
            std::thread::spawn(move || {
                if raw {
                    raw::serve(listener);
                } else {
                    serve_monoio(listener);
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// The gateway's stack: monoio on io_uring, the worker's ring flags, a task per connection.
fn serve_monoio(listener: std::net::TcpListener) {
    let mut urb = io_uring::IoUring::builder();
    urb.setup_single_issuer()
        .setup_defer_taskrun()
        .setup_taskrun_flag();
    let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .with_entries(1024)
        .uring_builder(urb)
        .build()
        .expect("an io_uring runtime");
    rt.block_on(async move {
        let listener = TcpListener::from_std(listener).expect("a listener");
        loop {
            if let Ok((stream, _)) = listener.accept().await {
                monoio::spawn(serve(stream));
            }
        }
    });
}

/// A non-blocking `SO_REUSEPORT` listener on `addr`, as a gateway worker's.
fn listener(addr: SocketAddr) -> std::net::TcpListener {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .expect("a socket");
    socket.set_nonblocking(true).expect("non-blocking");
    socket.set_reuse_port(true).expect("SO_REUSEPORT");
    socket.bind(&addr.into()).expect("bind");
    socket.listen(1024).expect("listen");
    socket.into()
}

/// `ADDR`, or the `[server] listen` value of the config given with `--config`.
fn listen_addr(args: &[String]) -> Result<SocketAddr, String> {
    match args {
        [_, a] => a.parse().map_err(|e| format!("{a}: {e}")),
        [_, flag, path, ..] if flag == "--config" => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            let config: toml::Table = text.parse().map_err(|e| format!("{path}: {e}"))?;
            let listen = config
                .get("server")
                .and_then(|s| s.get("listen"))
                .and_then(|l| l.as_str())
                .ok_or_else(|| format!("{path}: no [server] listen"))?;
            listen
                .parse()
                .map_err(|e| format!("{path}: [server] listen: {e}"))
        }
        _ => Err("usage: floor [--raw] ADDR | floor [--raw] --config weir.toml".into()),
    }
}

/// Answers each complete head in what arrives with [`RESPONSE`], until the client closes.
async fn serve(mut stream: TcpStream) {
    let mut recv = stream
        .recv_multishot()
        .expect("a multishot receive (kernel 6.0+)");
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut tail = 0;
    loop {
        match recv.recv(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        for _ in 0..count_heads(&mut tail, &buf) {
            out.extend_from_slice(RESPONSE);
        }
        buf.clear();
        if out.is_empty() {
            continue;
        }
        let (r, back) = stream.write_all(out).await;
        if r.is_err() {
            return;
        }
        out = back;
        out.clear();
    }
}

/// Heads ending in `data`, given the bytes `tail` the previous chunk ended with (updated).
fn count_heads(tail: &mut u32, data: &[u8]) -> usize {
    let mut n = 0;
    for &b in data {
        *tail = *tail << 8 | u32::from(b);
        if *tail == u32::from_be_bytes(*b"\r\n\r\n") {
            n += 1;
        }
    }
    n
}

// io_uring with nothing between is `unsafe` by nature (a buffer ring shared with the kernel,
// submission entries naming memory the kernel reads later): `unsafe_code` is `deny` in
// bench/ (bench/Cargo.toml) so that this module alone can allow it.
#[allow(unsafe_code)]
mod raw {
    use std::os::fd::AsRawFd;

    use io_uring::{IoUring, cqueue, opcode, squeue, types};

    use super::{RESPONSE, count_heads};

    /// Connections (fixed-file slots) and receive buffers.
    const SLOTS: u32 = 4096;
    const BUFS: u16 = 1024;
    const BUF_LEN: usize = 4096;
    /// The most answers one send carries (a client that pipelines more gets several sends).
    const BATCH: usize = 16;
    const BUF_GROUP: u16 = 0;
    /// Linux's `ENOBUFS`: the buffer ring ran dry; the receive is armed again.
    const ENOBUFS: i32 = 105;

    // What a completion is for: the kind in the high half of `user_data`, the slot below.
    const ACCEPT: u64 = 1 << 32;
    const RECV: u64 = 2 << 32;
    const SEND: u64 = 3 << 32;
    const CLOSE: u64 = 4 << 32;

    /// A registered buffer ring: `BUFS` entries of 16 bytes (address, length, id), the
    /// kernel's tail in the last two bytes of the first entry.
    struct BufRing {
        entries: *mut u8,
        data: Vec<u8>,
        tail: u16,
    }

    impl BufRing {
        fn new(ring: &IoUring) -> Self {
            let size = usize::from(BUFS) * 16;
            let layout = std::alloc::Layout::from_size_align(size, 4096).expect("a layout");
            // SAFETY: a non-zero size; zeroed memory is a valid empty ring.
            let entries = unsafe { std::alloc::alloc_zeroed(layout) };
            assert!(!entries.is_null(), "no memory for the buffer ring");
            // SAFETY: `entries` lives as long as the process (never freed), as the ring needs.
            unsafe {
                ring.submitter()
                    .register_buf_ring(entries as u64, BUFS, BUF_GROUP)
                    .expect("a registered buffer ring (kernel 5.19+)");
            }
            let mut r = BufRing {
                entries,
                data: vec![0; usize::from(BUFS) * BUF_LEN],
                tail: 0,
            };
            for bid in 0..BUFS {
                r.give(bid);
            }
            r.publish();
            r
        }

        fn buf(&self, bid: u16, len: usize) -> &[u8] {
            let at = usize::from(bid) * BUF_LEN;
            &self.data[at..at + len]
        }

        /// Puts buffer `bid` at the tail (seen by the kernel after [`publish`](Self::publish)).
        fn give(&mut self, bid: u16) {
            let slot = usize::from(self.tail & (BUFS - 1)) * 16;
            let addr = self.data.as_ptr() as u64 + (usize::from(bid) * BUF_LEN) as u64;
            // SAFETY: `slot` is within the ring's `BUFS * 16` bytes; the address, length and
            // id fields of an entry are at offsets 0, 8 and 12 (the tail, at 14, is left).
            unsafe {
                let e = self.entries.add(slot);
                e.cast::<u64>().write_unaligned(addr);
                e.add(8).cast::<u32>().write_unaligned(BUF_LEN as u32);
                e.add(12).cast::<u16>().write_unaligned(bid);
            }
            self.tail = self.tail.wrapping_add(1);
        }

        fn publish(&self) {
            // SAFETY: the tail is the `u16` at offset 14 of the first entry, aligned; the
            // kernel reads it with acquire ordering.
            let tail = unsafe { &*self.entries.add(14).cast::<std::sync::atomic::AtomicU16>() };
            tail.store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }

    pub(super) fn serve(listener: std::net::TcpListener) {
        let mut ring: IoUring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .build(1024)
            .expect("an io_uring ring (kernel 6.1+)");
        ring.submitter()
            .register_files_sparse(SLOTS)
            .expect("a fixed-file table");
        let mut bufs = BufRing::new(&ring);
        let answers: Vec<u8> = RESPONSE.repeat(BATCH);
        // Per slot: the last bytes received, to find a head end split across chunks.
        let mut tails = vec![0u32; SLOTS as usize];
        // Per slot: whether it holds a connection (a receive and a failed send may both ask
        // to close one; the second must not close the slot's next connection).
        let mut open = vec![false; SLOTS as usize];
        let mut pending: Vec<squeue::Entry> = vec![accept(&listener)];
        let mut cqes: Vec<(u64, i32, u32)> = Vec::with_capacity(1024);
        loop {
            {
                let mut sq = ring.submission();
                for e in pending.drain(..) {
                    // SAFETY: every buffer an entry points at is `answers` (alive for the
                    // loop) or the registered ring's.
                    unsafe { sq.push(&e).expect("room in the submission queue") };
                }
            }
            ring.submit_and_wait(1).expect("io_uring_enter");
            cqes.clear();
            cqes.extend(
                ring.completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            for &(data, res, flags) in &cqes {
                let slot = (data & 0xffff_ffff) as u32;
                match data & !0xffff_ffff {
                    ACCEPT => {
                        if let Ok(s) = u32::try_from(res) {
                            tails[s as usize] = 0;
                            open[s as usize] = true;
                            pending.push(recv(s));
                        }
                        if !cqueue::more(flags) {
                            pending.push(accept(&listener));
                        }
                    }
                    RECV => {
                        let Ok(n @ 1..) = usize::try_from(res) else {
                            if res != -ENOBUFS {
                                if std::mem::take(&mut open[slot as usize]) {
                                    pending.push(close(slot));
                                }
                                continue;
                            }
                            pending.push(recv(slot));
                            continue;
                        };
                        let bid = cqueue::buffer_select(flags).expect("a selected buffer");
                        let mut heads = count_heads(&mut tails[slot as usize], bufs.buf(bid, n));
                        bufs.give(bid);
                        bufs.publish();
                        while heads > 0 {
                            let k = heads.min(BATCH);
                            heads -= k;
                            let len = (k * RESPONSE.len()) as u32;
                            pending.push(
                                opcode::Send::new(types::Fixed(slot), answers.as_ptr(), len)
                                    .build()
                                    .flags(squeue::Flags::SKIP_SUCCESS)
                                    .user_data(SEND | u64::from(slot)),
                            );
                        }
                        if !cqueue::more(flags) {
                            pending.push(recv(slot));
                        }
                    }
                    // Only a failed send completes: the connection is gone.
                    SEND if std::mem::take(&mut open[slot as usize]) => pending.push(close(slot)),
                    _ => {}
                }
            }
        }
    }

    fn accept(listener: &std::net::TcpListener) -> squeue::Entry {
        opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .allocate_file_index(true)
            .build()
            .user_data(ACCEPT)
    }

    fn recv(slot: u32) -> squeue::Entry {
        opcode::RecvMulti::new(types::Fixed(slot), BUF_GROUP)
            .build()
            .user_data(RECV | u64::from(slot))
    }

    fn close(slot: u32) -> squeue::Entry {
        opcode::Close::new(types::Fixed(slot))
            .build()
            .user_data(CLOSE | u64::from(slot))
    }
}
