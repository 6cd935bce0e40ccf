//! The `weir-pingora` command line (CONTRACT §1).

use core::fmt;

/// Parsed command line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Cli {
    /// `--config PATH`.
    pub config: Option<String>,
    /// `--listen ADDR` (overrides `server.listen`).
    pub listen: Option<String>,
    /// `--admin ADDR|off` (overrides `server.admin`).
    pub admin: Option<String>,
    /// `--workers N` (0 = one per core).
    pub workers: Option<usize>,
    /// `--check`: validate, print, exit.
    pub check: bool,
    /// `--demo`: start the demo upstreams and serve a config routed to them.
    pub demo: bool,
    /// `--help`.
    pub help: bool,
}

/// A command-line error, printed with the usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The usage text.
pub const USAGE: &str = "\
usage: weir-pingora --config PATH [--listen ADDR] [--admin ADDR|off] [--workers N]
       weir-pingora --check --config PATH
       weir-pingora --demo [--config PATH] [--listen ADDR] [--admin ADDR|off]

  --config PATH   weir TOML config (the same file weir-gateway reads)
  --listen ADDR   override server.listen
  --admin ADDR    override server.admin (\"off\" disables the admin API)
  --workers N     proxy worker threads (0 = one per core)
  --check         validate the config, print the routes and policies understood, exit 0/1
  --demo          start the demo upstreams (blue, green) on loopback and a config routed to
                  them, and print ready-to-paste curl lines
SIGTERM/SIGINT stop accepting, drain in-flight requests (server.drain_timeout) and exit 0.";

impl Cli {
    /// Parses arguments (without the program name). Accepts `--flag value` and `--flag=value`.
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Cli, CliError> {
        let mut cli = Cli::default();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
                _ => (arg.clone(), None),
            };
            let mut value = |name: &str| -> Result<String, CliError> {
                inline
                    .clone()
                    .or_else(|| it.next())
                    .ok_or_else(|| CliError(format!("{name} needs a value")))
            };
            match flag.as_str() {
                "--config" => cli.config = Some(value("--config")?),
                "--listen" => cli.listen = Some(value("--listen")?),
                "--admin" => cli.admin = Some(value("--admin")?),
                "--workers" => {
                    let v = value("--workers")?;
                    cli.workers = Some(v.parse().map_err(|_| {
                        CliError(format!("--workers: `{v}` is not a non-negative integer"))
                    })?);
                }
                "--check" => cli.check = true,
                "--demo" => cli.demo = true,
                "-h" | "--help" => cli.help = true,
                other => return Err(CliError(format!("unknown argument `{other}`"))),
            }
        }
        if !cli.help && !cli.demo && cli.config.is_none() {
            return Err(CliError("--config PATH is required (or --demo)".into()));
        }
        if cli.check && cli.config.is_none() {
            return Err(CliError("--check needs --config PATH".into()));
        }
        Ok(cli)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(a: &[&str]) -> Result<Cli, CliError> {
        Cli::parse(a.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn flags_and_values() {
        let c = parse(&[
            "--config",
            "a.toml",
            "--listen=127.0.0.1:1",
            "--workers",
            "2",
            "--check",
        ])
        .unwrap();
        assert_eq!(c.config.as_deref(), Some("a.toml"));
        assert_eq!(c.listen.as_deref(), Some("127.0.0.1:1"));
        assert_eq!(c.workers, Some(2));
        assert!(c.check);
    }

    #[test]
    fn errors_name_the_flag() {
        assert!(parse(&["--config"]).unwrap_err().0.contains("--config"));
        assert!(
            parse(&["--workers", "x", "--demo"])
                .unwrap_err()
                .0
                .contains("--workers")
        );
        assert!(parse(&["--bogus"]).unwrap_err().0.contains("--bogus"));
        assert!(parse(&[]).is_err());
        assert!(parse(&["--demo"]).is_ok());
    }
}
