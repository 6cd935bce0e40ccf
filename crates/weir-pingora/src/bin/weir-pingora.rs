//! `weir-pingora`: weir's config served by a Pingora proxy (skeleton).

use std::process::ExitCode;

use weir_pingora::cli::{Cli, USAGE};

fn main() -> ExitCode {
    let cli = match Cli::parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("weir-pingora: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if cli.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    eprintln!("weir-pingora: policy engine not wired yet");
    ExitCode::FAILURE
}
