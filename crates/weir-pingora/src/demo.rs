//! `--demo`: the demo upstreams of CONTRACT §6 on loopback, and the example config
//! (`examples/gateway.toml`) routed to them.

use std::net::SocketAddr;
use std::path::PathBuf;

use weir_demo::DemoUpstream;

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
    /// The upstream servers (they stop when dropped).
    pub upstreams: [DemoUpstream; 2],
    /// Where the demo config was written (so `POST /admin/reload` works in demo mode).
    pub config_path: PathBuf,
    /// Blue upstream address.
    pub blue: SocketAddr,
    /// Green upstream address.
    pub green: SocketAddr,
}

impl Demo {
    /// Starts blue and green on their default ports (18181, 18182; any free port when taken)
    /// and writes the example config routed to them to a temporary file.
    pub fn start() -> Result<Demo, String> {
        let start = |name: &str, addr: &str| {
            DemoUpstream::start(name, addr)
                .or_else(|_| DemoUpstream::start(name, "127.0.0.1:0"))
                .map_err(|e| format!("demo upstream {name}: {e}"))
        };
        let blue = start("blue", weir_demo::DEFAULT_BLUE_ADDR)?;
        let green = start("green", weir_demo::DEFAULT_GREEN_ADDR)?;
        let config_path =
            std::env::temp_dir().join(format!("weir-pingora-demo-{}.toml", std::process::id()));
        std::fs::write(&config_path, demo_config(blue.addr(), green.addr()))
            .map_err(|e| format!("{}: {e}", config_path.display()))?;
        Ok(Demo {
            blue: blue.addr(),
            green: green.addr(),
            upstreams: [blue, green],
            config_path,
        })
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
