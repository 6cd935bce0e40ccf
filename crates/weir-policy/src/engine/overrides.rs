//! CLI overrides of `[server]` (`--listen`, `--admin`, `--workers`), applied on top of the
//! file at start-up and again after every reload.

use crate::check::ConfigError;
use crate::policy::ServerSettings;

/// CLI overrides applied on top of the file (and re-applied after every reload).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--listen ADDR`.
    pub listen: Option<String>,
    /// `--admin ADDR` (or `"off"`).
    pub admin: Option<String>,
    /// `--workers N`.
    pub workers: Option<usize>,
}

fn parse_addr(flag: &str, a: &str) -> Result<std::net::SocketAddr, ConfigError> {
    a.parse()
        .map_err(|_| ConfigError::plain(flag, format!("invalid address {a:?}")))
}

/// `s` with the overrides applied; an invalid address names its flag.
pub(crate) fn apply(s: &ServerSettings, o: &Overrides) -> Result<ServerSettings, ConfigError> {
    let mut s = s.clone();
    if let Some(l) = &o.listen {
        s.listen = parse_addr("--listen", l)?;
    }
    if let Some(a) = &o.admin {
        s.admin = match a.as_str() {
            "off" => None,
            a => Some(parse_addr("--admin", a)?),
        };
    }
    if let Some(w) = o.workers {
        s.workers = w;
    }
    if s.admin_exposed_without_token() {
        return Err(ConfigError::plain(
            "--admin",
            "server.admin: not a loopback address: set server.admin_token_env (an admin port is never open by accident)",
        ));
    }
    Ok(s)
}
