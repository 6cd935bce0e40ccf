//! Rough timing of request-head parsing (criterion suites live in `bench/`):
//! `cargo run --release -p weir-http --example parse_speed [fresh|reused|httparse] [N]`.
//! On a loaded machine prefer `perf stat -e instructions:u` over the printed times.

use core::hint::black_box;
use std::time::Instant;

use weir_http::{Limits, RequestHead, parse_request, parse_request_into};

/// A typical browser-like request head (313 bytes, CRLF line endings), shared by the tests
/// and `examples/parse_speed.rs`.
const HEAD: &[u8] = include_bytes!("typical_head.http");

fn main() {
    let mut args = std::env::args().skip(1);
    let modes: Vec<String> = match args.next() {
        Some(m) => vec![m],
        None => ["httparse", "fresh", "reused"].map(String::from).to_vec(),
    };
    let n: u32 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let limits = Limits::default();
    let mut head = RequestHead::default();
    for mode in modes {
        let t = Instant::now();
        for _ in 0..n {
            match mode.as_str() {
                "httparse" => {
                    let mut hs = [httparse::EMPTY_HEADER; 32];
                    let mut r = httparse::Request::new(&mut hs);
                    black_box(r.parse(black_box(HEAD)).unwrap());
                }
                "fresh" => {
                    black_box(parse_request(black_box(HEAD), &limits).unwrap());
                }
                _ => {
                    black_box(parse_request_into(&mut head, black_box(HEAD), &limits).unwrap());
                }
            }
        }
        println!(
            "{mode}: {}-byte head: {:?}/parse",
            HEAD.len(),
            t.elapsed() / n
        );
    }
}
