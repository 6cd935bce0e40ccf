//! `--demo`: the demo upstreams (blue and green, `weir-demo`) on loopback and the example
//! config routed to them — the scenarios a new user tries first (`/ok` limited to 2 per
//! minute, `/flaky` retried, `/slow` under a 200 ms per-try and 500 ms total budget,
//! `/orders` never retried automatically).
//!
//! The config *is* `examples/gateway.toml`, with the upstream addresses replaced by the ones
//! actually bound, so the demo and the documented example cannot drift apart. It is written
//! to a temporary file for the demo's lifetime, so that `POST /admin/reload` works in demo
//! mode too.
//!
//! On top of the example, the demo has one authenticated route, `/echo` (`[routes.auth]` with
//! a demo-only Ed25519 JWKS written next to the config, a limit of 5 per minute per verified
//! consumer): its curl line carries [`DEMO_TOKEN`], a ready-made token for `demo-user`. The
//! private key that signed it was discarded; make your own with docs/CONFIG.md's worked
//! example.

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

/// The demo identity's public key (Ed25519, `kid` `demo-1`): demo only, trust it nowhere.
pub const DEMO_JWKS: &str = r#"{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"demo-1","alg":"EdDSA","use":"sig","x":"U2StSb19VJJ5e1yx1qMJA5FvMJY_NKMi9Dnm77jnoII"}]}"#;

/// A token for `demo-user` (scope `read`, issuer and audience `weir-demo`, expires in
/// 2100), signed by the key of [`DEMO_JWKS`].
pub const DEMO_TOKEN: &str = "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCIsImtpZCI6ImRlbW8tMSJ9.eyJzdWIiOiJkZW1vLXVzZXIiLCJzY29wZSI6InJlYWQiLCJpc3MiOiJ3ZWlyLWRlbW8iLCJhdWQiOiJ3ZWlyLWRlbW8iLCJleHAiOjQxMDI0NDQ4MDB9.GxwekLsuB71MYXzbX1Y47maD0KPt-jyKSZa44FQu2jPSHF_DkMl8CdyW77zTYY6phSQOi-fvUP-AAFerDyNRAg";

/// The demo's authenticated route, appended to the example config (`jwks` is the path of
/// the written [`DEMO_JWKS`]).
pub fn auth_routes(jwks: &Path) -> String {
    format!(
        r#"
# --demo only: GET /echo needs a verified caller; 5 per minute per consumer; the upstream
# sees the verified subject in x-weir-consumer.
[[identities]]
name = "demo-users"
kind = "jwt"
jwks = {jwks:?}
algorithms = ["EdDSA"]
issuer = "weir-demo"
audience = "weir-demo"

[[routes]]
id = "echo"
match = {{ path_prefix = "/echo" }}
upstream = "blue"

[routes.auth]
identity = "demo-users"
scopes = ["read"]

[routes.rate_limit]
algorithm = "token_bucket"
rate = 5
per = "1m"
key = ["consumer"]
"#,
        jwks = jwks.display().to_string()
    )
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
        // Next to the config: `weir-demo-PID.jwks.json` (removed with it).
        let jwks_path = config_path.with_extension("jwks.json");
        let write = |p: &Path, text: &str| {
            std::fs::write(p, text)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        };
        write(&jwks_path, DEMO_JWKS)?;
        let text = config(blue.addr(), green.addr()) + &auth_routes(&jwks_path);
        write(&config_path, &text)?;
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
            format!(
                "curl -i {u}/echo                    # 401 unauthenticated (WWW-Authenticate: Bearer)"
            ),
            format!(
                "curl -i -H 'authorization: Bearer {DEMO_TOKEN}' {u}/echo   # 200 as demo-user, 5 per minute"
            ),
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
        let _ = std::fs::remove_file(self.config_path.with_extension("jwks.json"));
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

    #[test]
    fn the_demo_token_passes_the_demo_route() {
        use weir_policy::{Admission, RequestInfo, Timer};
        struct NoWait;
        impl Timer for NoWait {
            async fn sleep(&self, _d: core::time::Duration) {}
        }
        let dir = std::env::temp_dir().join(format!("weir-demo-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let jwks = dir.join("demo.jwks.json");
        std::fs::write(&jwks, DEMO_JWKS).unwrap();
        let a = SocketAddr::from(([127, 0, 0, 1], 1));
        let text =
            config(a, a).replace("access = \"stdout\"", "access = \"off\"") + &auth_routes(&jwks);
        let engine = weir_policy::Engine::from_toml(&text, "demo.toml").unwrap();
        let admit = |headers: &[(&str, &str)]| {
            let req = RequestInfo {
                method: "GET",
                path: "/echo",
                headers: &headers,
                client_ip: None,
                body_len: Some(0),
            };
            let mut f = engine.begin(&req);
            let r = weir_policy::__block_on(f.admit(&NoWait));
            matches!(r, Admission::Proceed)
        };
        let bearer = format!("Bearer {DEMO_TOKEN}");
        assert!(admit(&[("authorization", bearer.as_str())]));
        assert!(!admit(&[]));
        let _ = std::fs::remove_dir_all(dir);
    }
}
