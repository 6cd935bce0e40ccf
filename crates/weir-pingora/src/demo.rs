//! `--demo`: the demo upstreams of CONTRACT §6 on loopback, and the example config
//! (`examples/gateway.toml`) routed to them.

use std::net::SocketAddr;
use std::path::PathBuf;

/// The project's example config; its upstreams point at the demo ports 18181 / 18182.
pub const EXAMPLE_CONFIG: &str = include_str!("../../../examples/gateway.toml");

/// The example config with the demo upstreams' actual addresses.
pub fn demo_config(blue: SocketAddr, green: SocketAddr) -> String {
    EXAMPLE_CONFIG
        .replace("127.0.0.1:18181", &blue.to_string())
        .replace("127.0.0.1:18182", &green.to_string())
}

/// Running demo upstreams and the config file written for them.
pub struct Demo {
    /// Where the demo config was written (so `POST /admin/reload` works in demo mode).
    pub config_path: PathBuf,
    /// Blue upstream address.
    pub blue: SocketAddr,
    /// Green upstream address.
    pub green: SocketAddr,
}

impl Demo {
    /// Starts the upstreams and writes the config to a temporary file.
    pub fn start() -> Result<Demo, String> {
        Err("the demo upstreams (crate weir-demo) are not available in this build yet".into())
    }

    /// Ready-to-paste curl lines for the seed-000 scenarios.
    pub fn curl_lines(&self, listen: SocketAddr, admin: Option<SocketAddr>) -> String {
        let mut s = format!(
            "demo upstreams: blue {} green {}; config {}\n\
             curl -i http://{listen}/ok                       # 200, then 429 after 2/min\n\
             curl -i -H 'idempotency-key: k1' http://{listen}/flaky   # 200, x-weir-attempts: 2\n\
             curl -i http://{listen}/slow                     # 504 within 500 ms\n\
             curl -i -X POST http://{listen}/orders           # not retried\n\
             curl -i http://{listen}/nope                     # 404 no_route\n",
            self.blue,
            self.green,
            self.config_path.display()
        );
        if let Some(a) = admin {
            s.push_str(&format!(
                "curl -s http://{a}/metrics | grep weir_\n\
                 curl -s http://{a}/admin/breakers\n\
                 curl -s -X POST http://{a}/admin/reload\n"
            ));
        }
        s
    }
}
