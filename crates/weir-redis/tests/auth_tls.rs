//! AUTH and TLS against real `redis-server` processes: a `requirepass` server, an ACL user
//! (with the default user switched off), a TLS-only server checked against a CA file, and a
//! Redis Cluster whose nodes all require a password. Every failure is also checked for the
//! password: a wrong or missing credential must fail with an error that does not repeat it.
//! Skips (or fails under `WEIR_REQUIRE_REDIS=1`) like the other Redis tests.

mod common;

use std::time::Duration;

use common::{Server, block_on, free_port, installed};
use weir_core::{Nanos, Verdict};
use weir_policy::{Secret, StoreTls};
use weir_redis::{Limit, RedisSettings, RedisStore, StoreErrorKind};

const PASSWORD: &str = "s3cret-Pa55word";

fn limit() -> Limit {
    Limit::token_bucket(2, Nanos::from_secs(60), 2).unwrap()
}

fn settings(url: String) -> RedisSettings {
    RedisSettings {
        url,
        timeout: Duration::from_millis(1000),
        ..Default::default()
    }
}

/// Two calls: admitted, admitted (a fresh bucket of 2), or the store's error text.
fn two_calls(s: RedisSettings) -> Result<(), String> {
    let store = RedisStore::start(s).map_err(|e| e.to_string())?;
    for _ in 0..2 {
        let d = block_on(store.acquire("weir:{auth}:k", &limit(), 1)).map_err(|e| {
            assert!(
                matches!(
                    e.kind,
                    StoreErrorKind::Unavailable
                        | StoreErrorKind::Protocol
                        | StoreErrorKind::Timeout
                ),
                "{e}"
            );
            e.to_string()
        })?;
        assert_eq!(d.verdict, Verdict::Admit);
    }
    block_on(store.acquire("weir:{auth}:k", &limit(), 1)).map_err(|e| e.to_string())?;
    Ok(())
}

fn refused(s: RedisSettings) {
    let e = two_calls(s).expect_err("a call without the right credentials must fail");
    assert!(!e.contains(PASSWORD), "the password leaked into {e:?}");
}

/// A `redis-server` on a free port with `extra` arguments; `None` (skip) without Redis.
fn server(extra: &[&str]) -> Option<(Server, u16)> {
    if !installed() {
        return None;
    }
    let port = free_port();
    let p = port.to_string();
    let args: Vec<&str> = ["--port", p.as_str()]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    Some((Server::start_with(port, &args)?, port))
}

#[test]
fn requirepass_server_needs_the_password() {
    let Some((_srv, port)) = server(&["--requirepass", PASSWORD]) else {
        return;
    };
    let url = format!("redis://127.0.0.1:{port}/0");
    two_calls(RedisSettings {
        password: Some(Secret::new(PASSWORD)),
        ..settings(url.clone())
    })
    .unwrap();
    // The password in the URL works too.
    two_calls(settings(format!("redis://:{PASSWORD}@127.0.0.1:{port}/1"))).unwrap();
    refused(settings(url.clone()));
    refused(RedisSettings {
        password: Some(Secret::new("wrong")),
        ..settings(url)
    });
}

#[test]
fn acl_user_with_the_default_user_off() {
    let pw = format!(">{PASSWORD}");
    let acl = [
        "--user", "default", "off", "--user", "weir", "on", &pw, "~*", "+@all",
    ];
    let Some((_srv, port)) = server(&acl) else {
        return;
    };
    let url = format!("redis://127.0.0.1:{port}/0");
    two_calls(RedisSettings {
        username: Some("weir".into()),
        password: Some(Secret::new(PASSWORD)),
        ..settings(url.clone())
    })
    .unwrap();
    refused(RedisSettings {
        username: Some("someone".into()),
        password: Some(Secret::new(PASSWORD)),
        ..settings(url.clone())
    });
    refused(settings(url));
}

#[test]
fn tls_server_checked_against_the_ca_file() {
    if !installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let certs = weir_e2e::certs::make(dir.path());
    let port = free_port();
    let p = port.to_string();
    let path = |f: &std::path::Path| f.display().to_string();
    let (cert, key, ca) = (path(&certs.cert), path(&certs.key), path(&certs.ca));
    let _srv = Server::start_with(
        port,
        &[
            "--port",
            "0",
            "--tls-port",
            &p,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            "no",
            "--requirepass",
            PASSWORD,
        ],
    )
    .unwrap();
    let pem = std::fs::read(&ca).unwrap();
    let tls = Some(StoreTls {
        ca: Some((ca.clone().into(), pem)),
    });
    // `tls` with a redis:// URL, and a rediss:// URL: both speak TLS.
    for url in [
        format!("redis://127.0.0.1:{port}/0"),
        format!("rediss://127.0.0.1:{port}/1"),
    ] {
        two_calls(RedisSettings {
            password: Some(Secret::new(PASSWORD)),
            tls: tls.clone(),
            ..settings(url)
        })
        .unwrap();
    }
    // Cleartext to a TLS port, and TLS checked against the system roots (which do not
    // hold this CA): both refused.
    refused(RedisSettings {
        password: Some(Secret::new(PASSWORD)),
        ..settings(format!("redis://127.0.0.1:{port}/0"))
    });
    refused(RedisSettings {
        password: Some(Secret::new(PASSWORD)),
        tls: Some(StoreTls::default()),
        ..settings(format!("redis://127.0.0.1:{port}/0"))
    });
}

/// Settings for cluster `c` with `password` and `tls`.
fn cluster(
    c: &weir_e2e::cluster::RedisCluster,
    password: Option<&str>,
    tls: Option<StoreTls>,
) -> RedisSettings {
    RedisSettings {
        cluster: c.seeds(),
        password: password.map(Secret::new),
        tls,
        ..settings(String::new())
    }
}

/// A password-protected cluster in cleartext, then one speaking TLS only (clients,
/// replication and the bus): the right credentials work, the wrong ones (and cleartext to
/// TLS-only nodes, and TLS checked against the system roots) are refused.
#[test]
fn clusters_with_a_password_in_clear_and_over_tls() {
    use weir_e2e::cluster::RedisCluster;
    let test = "clusters_with_a_password_in_clear_and_over_tls";
    let Some(c) = RedisCluster::start_with_password(test, PASSWORD) else {
        return;
    };
    two_calls(cluster(&c, Some(PASSWORD), None)).unwrap();
    refused(cluster(&c, None, None));
    refused(cluster(&c, Some("wrong"), None));
    drop(c);
    let c = RedisCluster::start_tls(test, PASSWORD).expect("redis-server ran a moment ago");
    let ca = c.tls_ca().unwrap().to_path_buf();
    let pem = std::fs::read(&ca).unwrap();
    let with = |tls| cluster(&c, Some(PASSWORD), tls);
    two_calls(with(Some(StoreTls {
        ca: Some((ca, pem)),
    })))
    .unwrap();
    refused(with(None));
    refused(with(Some(StoreTls::default())));
}
