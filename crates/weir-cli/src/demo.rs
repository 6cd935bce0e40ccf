//! `--demo`: the demo upstreams (blue and green, `weir-demo`) on loopback and the example
//! config routed to them — the scenarios a new user tries first (`/ok` limited to 2 per
//! minute, `/flaky` retried, `/slow` under a 200 ms per-try and 500 ms total budget,
//! `/orders` never retried automatically).
//!
//! The config *is* `examples/gateway.toml`, with the upstream addresses replaced by the ones
//! actually bound, so the demo and the documented example cannot drift apart. It is written
//! to a temporary file for the demo's lifetime, so that `POST /admin/reload` works in demo
//! mode too.

use core::fmt::Write as _;
use core::net::SocketAddr;
use std::io;
use std::path::{Path, PathBuf};

use weir_demo::DemoUpstream;

/// The project's example config (`examples/gateway.toml`); its upstreams point at the demo
/// ports 18181 / 18182.
pub const EXAMPLE: &str = include_str!("../../../examples/gateway.toml");

/// The example config with the demo upstreams at `blue` and `green`.
pub fn config(blue: SocketAddr, green: SocketAddr) -> String {
    EXAMPLE
        .replace(weir_demo::DEFAULT_BLUE_ADDR, &blue.to_string())
        .replace(weir_demo::DEFAULT_GREEN_ADDR, &green.to_string())
}

/// The running demo upstreams and the config file routed to them. Dropping it stops the
/// upstreams and removes the file.
pub struct Demo {
    blue: DemoUpstream,
    green: DemoUpstream,
    config_path: PathBuf,
}

impl Demo {
    /// Starts blue and green on loopback — on the addresses of `examples/gateway.toml` when
    /// they are free (so that config works against a running demo too), else on ephemeral
    /// ports — and writes the config routed to them.
    ///
    /// # Errors
    /// An upstream that cannot bind, or a config file that cannot be written.
    pub fn start() -> io::Result<Demo> {
        let up = |name, preferred| {
            DemoUpstream::start(name, preferred)
                .or_else(|_| DemoUpstream::start(name, "127.0.0.1:0"))
        };
        let blue = up("blue", weir_demo::DEFAULT_BLUE_ADDR)?;
        let green = up("green", weir_demo::DEFAULT_GREEN_ADDR)?;
        let config_path =
            std::env::temp_dir().join(format!("weir-demo-{}.toml", std::process::id()));
        std::fs::write(&config_path, config(blue.addr(), green.addr()))
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", config_path.display())))?;
        Ok(Demo {
            blue,
            green,
            config_path,
        })
    }

    /// The demo config file.
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// Ready-to-paste curl lines for the listen and admin addresses actually bound (the
    /// binaries print them to stderr, after their start-up line).
    pub fn curl_lines(&self, listen: SocketAddr, admin: Option<SocketAddr>) -> String {
        let mut s = format!(
            "\ndemo upstreams: blue {}, green {}; config {}\ntry these:\n",
            self.blue.addr(),
            self.green.addr(),
            self.config_path.display()
        );
        let u = format!("http://{listen}");
        let lines = [
            format!("curl -i {u}/ok                      # 200, 200, then 429 (2 per minute)"),
            format!(
                "curl -i -H 'idempotency-key: k1' {u}/flaky   # 503 retried: 200 with x-weir-attempts: 2"
            ),
            format!("curl -i {u}/slow                    # 504 after the 500 ms total budget"),
            format!("curl -i -X POST -d '{{}}' {u}/orders  # proxied once, never retried"),
            format!("curl -i {u}/nowhere                 # 404 no_route"),
        ];
        for line in lines {
            let _ = writeln!(s, "  {line}");
        }
        if let Some(a) = admin {
            let _ = writeln!(s, "  curl -s http://{a}/metrics | grep weir_");
            let _ = writeln!(s, "  curl -s http://{a}/admin/breakers");
            let _ = writeln!(s, "  curl -s -X POST http://{a}/admin/reload");
        }
        s
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.config_path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_config_is_the_example_on_the_bound_ports() {
        let blue = SocketAddr::from(([127, 0, 0, 1], 1));
        let green = SocketAddr::from(([127, 0, 0, 1], 2));
        let text = config(blue, green);
        assert!(text.contains("\"127.0.0.1:1\"") && text.contains("\"127.0.0.1:2\""));
        assert!(!text.contains(weir_demo::DEFAULT_BLUE_ADDR));
        let set = weir_policy::Engine::from_toml(&text, "demo.toml").unwrap();
        let described = set.describe();
        for route in ["ok", "flaky", "slow", "orders"] {
            assert!(described.contains(route), "{route}: {described}");
        }
    }
}
