//! `--demo`: the demo upstreams of CONTRACT §6 (blue and green, on loopback) and a config
//! routed to them — the seed scenarios a new user tries first.

use core::fmt::Write as _;
use core::net::SocketAddr;
use std::io;

use weir_demo::DemoUpstream;

/// The running demo upstreams and the config text that routes to them.
pub(crate) struct Demo {
    pub(crate) config: String,
    _blue: DemoUpstream,
    _green: DemoUpstream,
}

/// Starts blue and green on loopback — on the addresses of `examples/gateway.toml` when they
/// are free (so that config works against a running demo too), else on ephemeral ports — and
/// renders the demo config.
pub(crate) fn start() -> io::Result<Demo> {
    let up = |name, preferred| {
        DemoUpstream::start(name, preferred).or_else(|_| DemoUpstream::start(name, "127.0.0.1:0"))
    };
    let blue = up("blue", weir_demo::DEFAULT_BLUE_ADDR)?;
    let green = up("green", weir_demo::DEFAULT_GREEN_ADDR)?;
    let config = config(blue.addr(), green.addr());
    Ok(Demo {
        config,
        _blue: blue,
        _green: green,
    })
}

/// The demo config: `/ok` limited to 2 per minute, `/flaky` retried, `/slow` under a 200 ms
/// per-try and 500 ms total budget, `/orders` never retried automatically.
pub(crate) fn config(blue: SocketAddr, green: SocketAddr) -> String {
    format!(
        r#"# weir-gateway --demo: generated config (CONTRACT §6)
[server]
listen = "127.0.0.1:8080"
admin = "127.0.0.1:9901"
instance = "demo"

[[upstreams]]
name = "blue"
endpoints = ["{blue}"]
connect_timeout_ms = 200

[[upstreams]]
name = "green"
endpoints = ["{green}"]
connect_timeout_ms = 200

# 2 requests per minute for everyone: the third gets 429 with Retry-After and RateLimit headers.
[[routes]]
id = "ok"
match = {{ path_prefix = "/ok", methods = ["GET", "HEAD"] }}
upstream = "blue"

[routes.rate_limit]
algorithm = "token_bucket"
rate = 2
per = "60s"
burst = 2
key = ["route"]

# The upstream fails the first attempt of each idempotency key with 503: retried, then 200.
[[routes]]
id = "flaky"
match = {{ path_prefix = "/flaky" }}
upstream = "blue"

[routes.retry]
max_attempts = 3
on = ["connect_failure", "reset", "protocol_error", "per_try_timeout", "502", "503", "504"]
idempotency_header = "idempotency-key"
methods = ["GET", "HEAD", "OPTIONS"]
backoff = {{ base = "25ms", max = "250ms", jitter = "full" }}

# The upstream answers after 350 ms: every try times out at 200 ms, the total budget ends at 500 ms.
[[routes]]
id = "slow"
match = {{ path_prefix = "/slow" }}
upstream = "green"

[routes.timeouts]
total = "500ms"
per_try = "200ms"

[routes.retry]
max_attempts = 3
on = ["connect_failure", "reset", "per_try_timeout"]
backoff = {{ base = "25ms", max = "100ms", jitter = "full" }}

# POST is not idempotent: never retried automatically.
[[routes]]
id = "orders"
match = {{ path_prefix = "/orders" }}
upstream = "blue"

[[routes]]
id = "stats"
match = {{ path_prefix = "/stats", methods = ["GET"] }}
upstream = "blue"
"#
    )
}

impl Demo {
    /// Ready-to-paste curl lines for the listen and admin addresses actually bound.
    pub(crate) fn curl_lines(&self, listen: SocketAddr, admin: Option<SocketAddr>) -> String {
        let mut s = String::from("\nweir-gateway demo: try these\n");
        let u = format!("http://{listen}");
        let _ = writeln!(
            s,
            "  curl -i {u}/ok                      # 200, 200, then 429 (2 per minute)"
        );
        let _ = writeln!(
            s,
            "  curl -i -H 'idempotency-key: k1' {u}/flaky   # 503 retried: 200 with x-weir-attempts: 2"
        );
        let _ = writeln!(
            s,
            "  curl -i {u}/slow                    # 504 after the 500 ms total budget"
        );
        let _ = writeln!(
            s,
            "  curl -i -X POST -d '{{}}' {u}/orders  # proxied once, never retried"
        );
        let _ = writeln!(
            s,
            "  curl -s {u}/stats                   # attempts the upstream saw"
        );
        let _ = writeln!(s, "  curl -i {u}/nowhere                 # 404 no_route");
        if let Some(a) = admin {
            let _ = writeln!(
                s,
                "  curl -s http://{a}/metrics          # Prometheus metrics"
            );
            let _ = writeln!(s, "  curl -s http://{a}/admin/breakers");
        }
        s
    }
}
