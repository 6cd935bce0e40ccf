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

#[test]
fn requirepass_server_needs_the_password() {
    if !installed() {
        return;
    }
    let port = free_port();
    let p = port.to_string();
    let _srv = Server::start_with(port, &["--port", &p, "--requirepass", PASSWORD]).unwrap();
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
    if !installed() {
        return;
    }
    let port = free_port();
    let p = port.to_string();
    let pw = format!(">{PASSWORD}");
    let _srv = Server::start_with(
        port,
        &[
            "--port", &p, "--user", "default", "off", "--user", "weir", "on", &pw, "~*", "+@all",
        ],
    )
    .unwrap();
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

#[test]
fn cluster_with_a_password() {
    let Some(c) =
        weir_e2e::cluster::RedisCluster::start_with_password("cluster_with_a_password", PASSWORD)
    else {
        return;
    };
    let cluster = |password: Option<&str>| RedisSettings {
        cluster: c.seeds(),
        password: password.map(Secret::new),
        ..settings(String::new())
    };
    two_calls(cluster(Some(PASSWORD))).unwrap();
    refused(cluster(None));
    refused(cluster(Some("wrong")));
}

#[test]
fn tls_cluster_with_a_password() {
    let Some(c) =
        weir_e2e::cluster::RedisCluster::start_tls("tls_cluster_with_a_password", PASSWORD)
    else {
        return;
    };
    let ca = c.tls_ca().unwrap().to_path_buf();
    let pem = std::fs::read(&ca).unwrap();
    let cluster = |tls: Option<StoreTls>| RedisSettings {
        cluster: c.seeds(),
        password: Some(Secret::new(PASSWORD)),
        tls,
        ..settings(String::new())
    };
    two_calls(cluster(Some(StoreTls {
        ca: Some((ca, pem)),
    })))
    .unwrap();
    // Cleartext to TLS-only nodes, and TLS against the system roots: refused.
    refused(cluster(None));
    refused(cluster(Some(StoreTls::default())));
}
