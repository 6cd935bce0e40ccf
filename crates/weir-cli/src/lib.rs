//! # weir-cli
//!
//! The command line of both weir binaries, `weir-gateway` (monoio) and `weir-pingora`: one
//! clap definition ([`Cli`]), the start-up steps every frontend runs before it serves
//! ([`prepare`]: `--check`, `--demo`, loading the config, the flag overrides), the error
//! format and exit codes ([`main`]), and the `--demo` upstreams with their config
//! ([`demo`]). A frontend adds only its own flags (weir-gateway's `--driver`, [`GatewayFlags`])
//! and what serving means for its runtime.
//!
//! A crate of its own so that clap stays out of the libraries: `weir-policy` never depends on
//! it, and weir-pingora's library users (embedders) skip it with `default-features = false`
//! (its binary needs the crate's default `cli` feature).
//!
//! Exit codes: 0 served and stopped, or `--check` passed; 1 a config that does not load or a
//! start-up failure (the message names the file, line and key, or what could not start);
//! 2 a command line clap cannot read (an unknown flag, a bad value, `--demo` with
//! `--config`). Flags and the config keys they override: docs/CONFIG.md.

pub mod demo;
pub mod simulate;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, ValueEnum};
use weir_policy::{Engine, Overrides};

use crate::demo::Demo;

/// The flags of every weir binary; `X` adds a frontend's own ([`GatewayFlags`] or
/// [`NoFlags`]).
#[derive(Debug, Parser)]
#[command(version, long_about = None)]
pub struct Cli<X: Args> {
    /// Config file (TOML; see examples/gateway.toml).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Listen address, overriding `server.listen`.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Admin address, overriding `server.admin` ("off" disables the admin API).
    #[arg(long, value_name = "ADDR|off")]
    pub admin: Option<String>,
    /// Worker threads (0 = one per core), overriding `server.workers`.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Validate the config, print the routes and policies understood, exit 0 (valid) or 1.
    #[arg(long)]
    pub check: bool,
    /// Start the demo upstreams (blue, green) on loopback with a matching config, and print
    /// ready-to-paste curl lines.
    #[arg(long, conflicts_with = "config")]
    pub demo: bool,
    /// The frontend's own flags.
    #[command(flatten)]
    pub frontend: X,
}

/// No flags of the frontend's own (weir-pingora).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct NoFlags {}

/// weir-gateway's own flags.
#[derive(Debug, Clone, Copy, Args)]
pub struct GatewayFlags {
    /// I/O driver; io_uring falls back to legacy (epoll) with a log line when refused.
    #[arg(long, value_enum, default_value = "io_uring")]
    pub driver: Driver,
}

/// weir-gateway's I/O driver (`--driver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Driver {
    /// io_uring (the default).
    #[value(name = "io_uring", alias = "iouring", alias = "io-uring")]
    IoUring,
    /// epoll.
    #[value(name = "legacy", alias = "epoll")]
    Legacy,
}

impl<X: Args> Cli<X> {
    /// Parses `args` (the program name first) for binary `bin`, described by `about`.
    ///
    /// # Errors
    /// What clap reports (its `exit()` prints it and exits 2; `--help` and `--version`
    /// exit 0).
    pub fn try_parse_from<I, T>(
        bin: &'static str,
        about: &'static str,
        args: I,
    ) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let mut cmd = Self::command().name(bin).bin_name(bin).about(about);
        let matches = cmd.try_get_matches_from_mut(args)?;
        Self::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
    }

    /// The overrides of `server.*` the flags ask for.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            listen: self.listen.clone(),
            admin: self.admin.clone(),
            workers: self.workers,
        }
    }
}

/// A binary's `main`: parses the command line (a bad one exits 2 with clap's message), runs
/// `run`, and prints its error as `BIN: error: MESSAGE` with exit code 1.
pub fn main<X: Args>(
    bin: &'static str,
    about: &'static str,
    run: impl FnOnce(Cli<X>) -> Result<ExitCode, String>,
) -> ExitCode {
    // `BIN simulate ...` is a command of its own (no gateway starts).
    if std::env::args_os().nth(1).is_some_and(|a| a == "simulate") {
        let mut cmd = simulate::SimulateArgs::command()
            .name("simulate")
            .bin_name(format!("{bin} simulate"))
            .about("Runs a trace through the config on virtual time, upstreams simulated.");
        let sim = cmd
            .try_get_matches_from_mut(std::env::args_os().skip(2))
            .and_then(|m| simulate::SimulateArgs::from_arg_matches(&m))
            .unwrap_or_else(|e| e.format(&mut cmd).exit());
        return simulate::run(sim).unwrap_or_else(|e| {
            say(format_args!("{bin}: error: {e}"));
            ExitCode::FAILURE
        });
    }
    let cli =
        Cli::<X>::try_parse_from(bin, about, std::env::args_os()).unwrap_or_else(|e| e.exit());
    run(cli).unwrap_or_else(|e| {
        say(format_args!("{bin}: error: {e}"));
        ExitCode::FAILURE
    })
}

/// Writes one line to stderr and ignores a failed write. A running frontend logs with this
/// rather than `eprintln!`, which panics when stderr is a closed pipe (a supervisor or a
/// terminal that went away) and would take the logging thread — a worker, the signal or
/// reload thread — down with it.
pub fn say(line: core::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// `SIGHUP` reloads the config like `POST /admin/reload` (nginx's `-s reload` habit), on a
/// thread of its own; the outcome goes to stderr as `BIN: SIGHUP: reloaded, revision N` or
/// `BIN: SIGHUP: reload failed: ERROR; revision N keeps serving`. `SIGUSR1` reopens the
/// access log (nginx's `-s reopen`, for logrotate without copytruncate): `BIN: SIGUSR1:
/// access log reopened` or why not. Call once, after the engine has its store; the
/// engine's start-up notices are printed first.
///
/// # Errors
/// The handler cannot be installed.
pub fn reload_on_sighup(bin: &'static str, engine: Engine) -> Result<(), String> {
    // What start-up had to say (e.g. a torn quota-ledger record dropped).
    for n in engine.take_notices() {
        say(format_args!("{bin}: {n}"));
    }
    use signal_hook::consts::{SIGHUP, SIGUSR1};
    let mut signals = signal_hook::iterator::Signals::new([SIGHUP, SIGUSR1])
        .map_err(|e| format!("cannot install the SIGHUP/SIGUSR1 handlers: {e}"))?;
    std::thread::Builder::new()
        .name("weir-sighup".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGUSR1 {
                    match engine.reopen_access_log() {
                        Ok(()) => say(format_args!("{bin}: SIGUSR1: access log reopened")),
                        Err(e) => say(format_args!(
                            "{bin}: SIGUSR1: {e}; the previous log file stays in use"
                        )),
                    }
                    continue;
                }
                say(format_args!("{bin}: {}", sighup_reload(&engine)));
                for n in engine.take_notices() {
                    say(format_args!("{bin}: {n}"));
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// [`prepare`], then what every frontend does before it serves: the engine gets its global
/// store from `attach` (weir-redis's for `[store] kind = "redis"`, which connects lazily; an
/// error is `store: ...`) and reloads on SIGHUP ([`reload_on_sighup`], which also prints the
/// start-up notices).
///
/// # Errors
/// Those of [`prepare`], of `attach` and of [`reload_on_sighup`].
pub fn start_up<X: Args>(
    cli: &Cli<X>,
    bin: &'static str,
    attach: impl FnOnce(Engine) -> Result<Engine, String>,
) -> Result<Ready, String> {
    match prepare(cli)? {
        Ready::Serve(mut s) => {
            s.engine = attach(s.engine).map_err(|e| format!("store: {e}"))?;
            reload_on_sighup(bin, s.engine.clone())?;
            Ok(Ready::Serve(s))
        }
        checked @ Ready::Checked(_) => Ok(checked),
    }
}

/// One SIGHUP's reload and the line it prints.
fn sighup_reload(engine: &Engine) -> String {
    match engine.reload() {
        Ok(rev) => format!("SIGHUP: reloaded, revision {rev}"),
        Err(e) => format!(
            "SIGHUP: reload failed: {e}; revision {} keeps serving",
            engine.revision()
        ),
    }
}

/// What to do after [`prepare`].
pub enum Ready {
    /// `--check` ran and printed its verdict: exit with this code.
    Checked(ExitCode),
    /// Serve this.
    Serve(Serving),
}

/// A loaded config to serve, with the demo upstreams when `--demo` started them.
pub struct Serving {
    /// The engine, flag overrides applied.
    pub engine: Engine,
    /// The config file (`POST /admin/reload` re-reads it; the demo's is a temporary file).
    pub config: PathBuf,
    /// The running demo upstreams (`--demo`); they stop when dropped.
    pub demo: Option<Demo>,
}

/// The start-up steps of every weir binary: `--check` (validate, print what was understood,
/// 0/1), `--demo` (start the upstreams, load their config), or load `--config`; then apply
/// `--listen`, `--admin` and `--workers`.
///
/// # Errors
/// No config given, a config that does not load, demo upstreams that cannot start.
pub fn prepare<X: Args>(cli: &Cli<X>) -> Result<Ready, String> {
    if cli.check && !cli.demo {
        let Some(path) = &cli.config else {
            return Err("--check needs --config PATH".into());
        };
        return Ok(Ready::Checked(match Engine::check(path) {
            Ok(set) => {
                // Written, not `print!`ed: `--check | head` closes stdout early, and that is
                // not a reason to panic.
                use std::io::Write as _;
                let mut out = std::io::stdout().lock();
                let _ = write!(out, "{}", set.describe());
                let _ = writeln!(out, "{}: OK", path.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                say(format_args!("{e}"));
                ExitCode::FAILURE
            }
        }));
    }
    let (config, demo) = if cli.demo {
        let d = Demo::start().map_err(|e| format!("cannot start the demo upstreams: {e}"))?;
        (d.config_path().to_owned(), Some(d))
    } else {
        let Some(path) = &cli.config else {
            return Err(
                "no config: pass --config PATH (see examples/gateway.toml) or --demo (see --help)"
                    .into(),
            );
        };
        (path.clone(), None)
    };
    let engine = Engine::load(&config)
        .and_then(|e| e.try_with_overrides(cli.overrides()))
        .map_err(|e| e.to_string())?;
    if cli.check {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "{}", engine.describe());
        let _ = writeln!(out, "demo config: OK");
        return Ok(Ready::Checked(ExitCode::SUCCESS));
    }
    Ok(Ready::Serve(Serving {
        engine,
        config,
        demo,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<X: Args>(a: &[&str]) -> Result<Cli<X>, String> {
        let args = core::iter::once("weir").chain(a.iter().copied());
        Cli::try_parse_from("weir", "test", args).map_err(|e| e.to_string())
    }

    #[test]
    fn flags_and_values() {
        let c = parse::<NoFlags>(&[
            "--config",
            "a.toml",
            "--listen=127.0.0.1:1",
            "--workers",
            "2",
            "--check",
        ])
        .unwrap();
        assert_eq!(c.config.as_deref(), Some(std::path::Path::new("a.toml")));
        assert_eq!(c.listen.as_deref(), Some("127.0.0.1:1"));
        assert_eq!(c.workers, Some(2));
        assert!(c.check);
        let g = parse::<GatewayFlags>(&["--demo", "--driver", "epoll"]).unwrap();
        assert_eq!(g.frontend.driver, Driver::Legacy);
        assert_eq!(
            parse::<GatewayFlags>(&[]).unwrap().frontend.driver,
            Driver::IoUring
        );
    }

    #[test]
    fn errors_name_the_flag() {
        assert!(
            parse::<NoFlags>(&["--config"])
                .unwrap_err()
                .contains("--config")
        );
        assert!(
            parse::<NoFlags>(&["--workers", "x", "--demo"])
                .unwrap_err()
                .contains("--workers")
        );
        assert!(
            parse::<NoFlags>(&["--bogus"])
                .unwrap_err()
                .contains("--bogus")
        );
        assert!(
            parse::<NoFlags>(&["--driver", "legacy"]).is_err(),
            "gateway only"
        );
        assert!(parse::<NoFlags>(&["--demo", "--config", "a.toml"]).is_err());
        let none = parse::<NoFlags>(&[]).unwrap();
        assert!(prepare(&none).is_err_and(|e| e.contains("--demo")));
        assert!(parse::<NoFlags>(&["--demo"]).is_ok());
        let check = parse::<NoFlags>(&["--check"]).unwrap();
        assert!(prepare(&check).is_err_and(|e| e.contains("--config")));
    }
}
