//! Test certificates made with the `openssl` command line (Debian's openssl): a CA and a
//! server certificate for `127.0.0.1` and `localhost` signed by it, P-256 keys, valid for two
//! days. For tests of TLS to Redis (and of any TLS listener): nothing here is a secret.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The files [`make`] writes.
#[derive(Debug, Clone)]
pub struct TestCerts {
    /// The CA certificate (PEM): what a client trusts.
    pub ca: PathBuf,
    /// The server certificate (PEM), for `IP:127.0.0.1` and `DNS:localhost`.
    pub cert: PathBuf,
    /// The server's private key (PEM).
    pub key: PathBuf,
}

/// Writes `ca.pem`, `ca.key`, `server.pem` and `server.key` into `dir`. Panics with
/// openssl's stderr when a step fails.
pub fn make(dir: &Path) -> TestCerts {
    let run = |args: &[&str]| {
        let mut openssl = Command::new("openssl");
        let out = openssl.args(args).current_dir(dir).output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!("openssl {args:?}: {}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => panic!("the openssl command line (apt-get install openssl): {e}"),
        }
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &["-keyout", "ca.key", "-out", "ca.pem"],
        &["-days", "2", "-subj", "/CN=weir test CA"],
    ]
    .concat());
    run(&[
        &["req"][..],
        &ec,
        &["-keyout", "server.key", "-out", "server.csr"],
        &["-subj", "/CN=127.0.0.1"],
    ]
    .concat());
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .expect("write san.ext");
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ]);
    TestCerts {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
    }
}
