//! A real Redis Cluster on loopback for the cluster scenarios: three masters with one
//! replica each, every node a `redis-server` child process on free ports (client and bus
//! port both chosen, so nothing collides with another test) with its `nodes.conf` in a
//! scratch directory. Made by `redis-cli --cluster create`, ready once every node reports
//! `cluster_state:ok` and sees the same three masters; every node is killed on drop.
//!
//! It skips like [`crate::redis`] when `redis-server` is missing, and fails instead under
//! `WEIR_REQUIRE_REDIS=1`. Every wait is bounded.

use core::time::Duration;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Instant;

use crate::harness::{free_port, scratch_dir};

/// Slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// One node's process.
struct Node {
    port: u16,
    child: Option<Child>,
}

/// A running three-master, three-replica cluster; every node is killed on drop.
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: PathBuf,
    /// `requirepass` (and `masterauth`) of every node, when started with one.
    password: Option<String>,
    /// TLS only (clients, replication and the cluster bus), with these certificates.
    tls: Option<crate::certs::TestCerts>,
}

/// A master as `CLUSTER NODES` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Master {
    /// Its client port.
    pub port: u16,
    /// The slot ranges it serves (inclusive).
    pub slots: Vec<(u16, u16)>,
}

impl Master {
    /// Whether it serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }
}

impl RedisCluster {
    /// Starts six nodes and joins them; `None` (skip) without `redis-server` (see the
    /// module docs). Panics when the cluster is not ready within 30 s.
    pub fn start(test: &str) -> Option<RedisCluster> {
        Self::start_with(test, None, false)
    }

    /// [`RedisCluster::start`] with every node requiring `password` (`requirepass`, and
    /// `masterauth` so replicas can follow their masters).
    pub fn start_with_password(test: &str, password: &str) -> Option<RedisCluster> {
        Self::start_with(test, Some(password), false)
    }

    /// [`RedisCluster::start_with_password`] with every node speaking TLS only (to clients,
    /// between replicas and on the cluster bus), its certificate signed by
    /// [`RedisCluster::tls_ca`].
    pub fn start_tls(test: &str, password: &str) -> Option<RedisCluster> {
        Self::start_with(test, Some(password), true)
    }

    /// The CA file a client must trust (a cluster from [`RedisCluster::start_tls`]).
    pub fn tls_ca(&self) -> Option<&std::path::Path> {
        self.tls.as_ref().map(|t| t.ca.as_path())
    }

    fn start_with(test: &str, password: Option<&str>, tls: bool) -> Option<RedisCluster> {
        if !crate::redis::available(test) {
            return None;
        }
        let cli = Command::new("redis-cli")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !cli {
            assert!(
                !crate::redis::required(),
                "{test}: redis-cli is missing but {}=1 (apt-get install redis-tools)",
                crate::redis::REQUIRE_ENV
            );
            eprintln!("{test}: SKIPPED: redis-cli is not installed (it builds the cluster)");
            return None;
        }
        let dir = scratch_dir().keep();
        let tls = tls.then(|| crate::certs::make(&dir));
        let mut c = RedisCluster {
            nodes: Vec::new(),
            dir,
            password: password.map(str::to_owned),
            tls,
        };
        for i in 0..6 {
            c.nodes.push(c.spawn_node(i, free_port()));
        }
        let mut create = c.redis_cli();
        create.arg("--cluster").arg("create");
        for n in &c.nodes {
            create.arg(format!("127.0.0.1:{}", n.port));
        }
        let out = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "{test}: redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        c.wait_ready(Duration::from_secs(30));
        Some(c)
    }

    /// `redis-cli`, given the cluster's password through `REDISCLI_AUTH` (not on the
    /// command line, where `ps` would show it).
    fn redis_cli(&self) -> Command {
        let mut c = Command::new("redis-cli");
        if let Some(pw) = &self.password {
            c.env("REDISCLI_AUTH", pw);
        }
        if let Some(t) = &self.tls {
            c.arg("--tls").arg("--cacert").arg(&t.ca);
        }
        c
    }

    /// Starts node `i` on `port` (its bus port another free one) and waits until it listens.
    fn spawn_node(&self, i: usize, port: u16) -> Node {
        let conf = self.dir.join(format!("nodes-{i}.conf"));
        let mut server = Command::new("redis-server");
        match &self.tls {
            None => server.args(["--port", &port.to_string()]),
            Some(t) => server
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .args(["--tls-cluster", "yes", "--tls-replication", "yes"])
                .args(["--tls-auth-clients", "no"])
                .arg("--tls-cert-file")
                .arg(&t.cert)
                .arg("--tls-key-file")
                .arg(&t.key)
                .arg("--tls-ca-cert-file")
                .arg(&t.ca),
        };
        let child = server
            .args(["--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
            .args(["--cluster-port", &free_port().to_string()])
            .arg("--cluster-config-file")
            .arg(&conf)
            .args(["--save", "", "--appendonly", "no"])
            .args(
                self.password
                    .iter()
                    .flat_map(|pw| ["--requirepass", pw.as_str(), "--masterauth", pw.as_str()]),
            )
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let until = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < until,
                "cluster node {i} did not listen on 127.0.0.1:{port}"
            );
            thread::sleep(Duration::from_millis(20));
        }
        Node {
            port,
            child: Some(child),
        }
    }

    /// `host:port` of every node (the seeds a client may start from).
    pub fn seeds(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect()
    }

    /// The TOML array of [`seeds`](Self::seeds): `["127.0.0.1:P", ...]`.
    pub fn seeds_toml(&self) -> String {
        let s: Vec<String> = self.seeds().iter().map(|s| format!("{s:?}")).collect();
        format!("[{}]", s.join(", "))
    }

    /// Runs `redis-cli -p port ARGS...` and returns its output ("" when it fails).
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        self.redis_cli()
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// The hash slot of `key`, as the cluster computes it (`CLUSTER KEYSLOT`): lets a test
    /// pick keys on a given master without a second implementation of the hash.
    pub fn slot_of(&self, key: &str) -> u16 {
        let port = self.live_ports().next().expect("a live node");
        let out = self.cli(port, &["CLUSTER", "KEYSLOT", key]);
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("CLUSTER KEYSLOT {key:?} answered {out:?}"))
    }

    /// The masters that serve slots, as node `port` sees them (live nodes only).
    pub fn masters_seen_by(&self, port: u16) -> Vec<Master> {
        let mut out: Vec<Master> = self
            .cli(port, &["CLUSTER", "NODES"])
            .lines()
            .filter_map(parse_master)
            .collect();
        out.sort_by_key(|m| m.slots.first().copied());
        out
    }

    /// The masters, as the first live node sees them.
    pub fn masters(&self) -> Vec<Master> {
        let port = self.live_ports().next().expect("a live node");
        self.masters_seen_by(port)
    }

    /// The master serving `slot`.
    pub fn master_of(&self, slot: u16) -> Master {
        self.masters()
            .into_iter()
            .find(|m| m.serves(slot))
            .unwrap_or_else(|| panic!("no live master serves slot {slot}"))
    }

    fn live_ports(&self) -> impl Iterator<Item = u16> + '_ {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
    }

    /// Kills the node on `port` (as a crash: SIGKILL).
    pub fn kill(&mut self, port: u16) {
        for n in &mut self.nodes {
            if n.port == port
                && let Some(mut c) = n.child.take()
            {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    /// Waits until every live node reports `cluster_state:ok`, all slots are covered by
    /// three live masters that every live node agrees on, and every replica's link to its
    /// master is up; panics after `limit`. Returns the masters.
    pub fn wait_ready(&self, limit: Duration) -> Vec<Master> {
        let until = Instant::now() + limit;
        loop {
            let ports: Vec<u16> = self.live_ports().collect();
            let views: Vec<Vec<Master>> = ports.iter().map(|&p| self.masters_seen_by(p)).collect();
            let ok = ports.iter().all(|&p| {
                self.cli(p, &["CLUSTER", "INFO"])
                    .contains("cluster_state:ok")
            });
            let agreed = views.windows(2).all(|w| w[0] == w[1]);
            let covered = views.first().is_some_and(|v| {
                v.len() == 3
                    && v.iter()
                        .flat_map(|m| m.slots.iter())
                        .map(|&(a, b)| u32::from(b - a) + 1)
                        .sum::<u32>()
                        == u32::from(SLOTS)
                    && v.iter().all(|m| ports.contains(&m.port))
            });
            // A replica that never synced is not allowed to take over its master.
            let synced = ports.iter().all(|&p| {
                let info = self.cli(p, &["INFO", "replication"]);
                info.contains("role:master") || info.contains("master_link_status:up")
            });
            if ok && agreed && covered && synced {
                return views.into_iter().next().unwrap_or_default();
            }
            assert!(
                Instant::now() < until,
                "redis cluster not ready within {limit:?}: {views:?}"
            );
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A `CLUSTER NODES` line of a live master with slots → [`Master`].
fn parse_master(line: &str) -> Option<Master> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let flags = f.get(2)?;
    if !flags.contains("master") || flags.contains("fail") {
        return None;
    }
    let port = f
        .get(1)?
        .split('@')
        .next()?
        .rsplit(':')
        .next()?
        .parse()
        .ok()?;
    let slots: Vec<(u16, u16)> = f
        .iter()
        .skip(8)
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => s.parse().ok().map(|a| (a, a)),
        })
        .collect();
    (!slots.is_empty()).then_some(Master { port, slots })
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
