//! # weir-demo
//!
//! The demo upstreams of weir's `--demo` mode (`weir-cli`'s demo, docs/FRONTENDS.md) and a
//! small blocking client, for the gateway binaries and end-to-end tests. Plain `std::net` and one thread per connection:
//! this is a test server, bounded to [`MAX_CONNECTIONS`] connections, bound to loopback only.
//! It parses with `weir-http`, so it is as strict as the gateway.
//!
//! ```no_run
//! let blue = weir_demo::DemoUpstream::start("blue", "127.0.0.1:0").unwrap();
//! let mut c = weir_demo::Client::connect(blue.addr()).unwrap();
//! let r = c.get("/ok").unwrap();
//! assert_eq!(r.status(), 200);
//! assert_eq!(blue.stats().path("/ok"), 1);
//! ```
//!
//! ## Endpoints
//! | request | answer |
//! |---|---|
//! | `GET /ok` | 200 `{"upstream":NAME,"path":"/ok"}` |
//! | `GET /flaky` | with an `idempotency-key`: 503 on the first attempt of each key, 200 after; without one: 503 on odd-numbered keyless calls (1st, 3rd, …), 200 on even ones — so one retry always succeeds |
//! | `GET /slow[?ms=N]` | 200 after 350 ms (or N ms, at most 30 s) |
//! | `POST /orders` | 200 `{"upstream":NAME,"order":N}`, N counting calls (other methods: 405) |
//! | `GET /stats` | JSON attempt counts: `{"upstream","total","paths":{PATH:N},"flaky_keys":{KEY:N},"orders"}` (`/stats` itself is not counted) |
//! | `GET /status/NNN` | status NNN (200..=599) |
//! | `GET /stream?chunks=N&delay_ms=M` | 200, a chunked body of N chunks (default 5) sent M ms apart (default 100) |
//! | `GET /close[?chunked=1]` | a head promising 100 bytes (or a chunked body), 10 bytes of body, then the connection closes |
//! | `ANY /echo` | 200, the request as JSON: `method`, `target`, `version`, `headers` (`[[name, value], …]` in order), `body_len`, `body` (first MiB, lossy UTF-8) |
//! | anything else | 404 |
//!
//! Methods other than the one listed are accepted except on `/orders`; `HEAD` gets the `GET`
//! head without a body. Every response carries `x-upstream: NAME`. Keep-alive follows the
//! request (HTTP/1.1 default), `Expect: 100-continue` is answered. [`DemoUpstream::set_down`]
//! makes it close every accepted connection and every request on existing connections without
//! answering, like a dead backend, until set back.

mod client;
mod json;
mod server;

pub use client::{Client, Response};
pub use server::{DemoStats, DemoUpstream, MAX_CONNECTIONS};

/// Where `--demo` binds the blue upstream (the address in `examples/gateway.toml`).
pub const DEFAULT_BLUE_ADDR: &str = "127.0.0.1:18181";
/// Where `--demo` binds the green upstream.
pub const DEFAULT_GREEN_ADDR: &str = "127.0.0.1:18182";
