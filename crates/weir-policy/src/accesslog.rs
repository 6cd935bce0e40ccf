//! The access log: one JSON object per request, written by a dedicated thread.
//!
//! Requests never wait for the log: records go through a bounded channel with
//! `try_send`, and a full channel drops the record and counts it (see
//! [`crate::Engine::access_log_dropped`]). The thread writes through a buffer and flushes
//! whenever the channel runs empty, so a record is on disk or stdout well within a second.
//! The record holds no request header at all (so never `Authorization` or cookies) and the
//! path without its query string; the key is a digest.
//!
//! Rotation is nginx's: `mv access.log access.log.1`, then `SIGUSR1` (or a reload) makes the
//! thread flush what it holds into the old file and open the path again
//! ([`AccessLog::reopen`]), so no record is lost and none lands in the rotated file after
//! the signal was handled. No copytruncate is needed. A reopen that fails (the folder is
//! gone) keeps writing to the file that was open and says why.

use crate::outcome::Outcome;
use prometheus_client::metrics::counter::Counter;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::time::Duration;

/// `[log] access`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogTarget {
    /// One JSON line per request on standard output (the default).
    Stdout,
    /// Appended to this file.
    File(PathBuf),
    /// No access log.
    Off,
}

/// One upstream attempt in a record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct AttemptRec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'static str>,
    pub ms: u64,
    /// The endpoint tried (`IP:PORT`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// One request.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Record {
    pub ts: String,
    pub request_id: String,
    pub instance: String,
    pub route: String,
    pub method: String,
    pub path: String,
    /// The client's address (behind `trusted_proxies`, the one they named), or null.
    pub client: Option<core::net::IpAddr>,
    pub status: u16,
    pub reason: Option<Outcome>,
    pub key_digest: Option<String>,
    /// A digest of the verified consumer (routes with `[routes.auth]`), never the raw value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_digest: Option<String>,
    pub scope: Option<&'static str>,
    pub remaining: Option<u64>,
    pub attempts: Vec<AttemptRec>,
    pub queue_ms: u64,
    pub duration_ms: u64,
    pub revision: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<Outcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratelimit: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Outcome>,
}

enum Msg {
    Line(String),
    Flush(SyncSender<()>),
    /// Flush, then write to this target from now on (the answer: whether it opened).
    Reopen(AccessLogTarget, SyncSender<Result<(), String>>),
}

/// The sending side; the thread ends when this is dropped.
pub(crate) struct AccessLog {
    tx: Option<SyncSender<Msg>>,
    /// Whether records are built at all (`access = "off"` after a reload: no).
    on: AtomicBool,
    /// Records dropped because the queue was full (`weir_access_log_dropped_total`).
    pub(crate) dropped: Counter,
}

const QUEUE: usize = 16 * 1024;

type Out = std::io::BufWriter<Box<dyn Write + Send>>;

/// The writer of `target`; `None` for `Off`.
fn open(target: &AccessLogTarget) -> std::io::Result<Option<Box<dyn Write + Send>>> {
    Ok(match target {
        AccessLogTarget::Off => None,
        AccessLogTarget::Stdout => Some(Box::new(std::io::stdout())),
        AccessLogTarget::File(p) => Some(Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?,
        )),
    })
}

impl AccessLog {
    /// Starts the log thread for `target` (none for `Off`); drops are counted on `dropped`.
    pub(crate) fn start(target: &AccessLogTarget, dropped: Counter) -> std::io::Result<AccessLog> {
        let Some(out) = open(target)? else {
            return Ok(AccessLog {
                tx: None,
                on: AtomicBool::new(false),
                dropped,
            });
        };
        let (tx, rx) = mpsc::sync_channel::<Msg>(QUEUE);
        std::thread::Builder::new()
            .name("weir-access-log".into())
            .spawn(move || {
                let mut w: Out = std::io::BufWriter::with_capacity(64 * 1024, out);
                loop {
                    let first = match rx.recv_timeout(Duration::from_millis(500)) {
                        Ok(m) => m,
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => break,
                    };
                    let mut acks = Vec::new();
                    let mut handle = |m: Msg, w: &mut Out| match m {
                        Msg::Line(l) => {
                            let _ = w.write_all(l.as_bytes());
                            let _ = w.write_all(b"\n");
                        }
                        Msg::Flush(ack) => acks.push(ack),
                        Msg::Reopen(target, ack) => {
                            let _ = w.flush();
                            let r = match open(&target) {
                                Ok(Some(out)) => {
                                    *w = std::io::BufWriter::with_capacity(64 * 1024, out);
                                    Ok(())
                                }
                                Ok(None) => {
                                    *w = std::io::BufWriter::new(Box::new(std::io::sink()));
                                    Ok(())
                                }
                                Err(e) => Err(e.to_string()),
                            };
                            let _ = ack.send(r);
                        }
                    };
                    handle(first, &mut w);
                    while let Ok(m) = rx.try_recv() {
                        handle(m, &mut w);
                    }
                    let _ = w.flush();
                    for a in acks {
                        let _ = a.send(());
                    }
                }
                let _ = w.flush();
            })?;
        Ok(AccessLog {
            tx: Some(tx),
            on: AtomicBool::new(true),
            dropped,
        })
    }

    /// Whether records are written at all (`[log] access = "off"`: no).
    pub(crate) fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Flushes what was written so far and opens `target` afresh (rotation: SIGUSR1, a
    /// reload). Blocks until the log thread has done it. A log that started `off` has no
    /// thread: turning it on needs a restart, and this says so.
    pub(crate) fn reopen(&self, target: &AccessLogTarget) -> Result<(), String> {
        let Some(tx) = &self.tx else {
            return match target {
                AccessLogTarget::Off => Ok(()),
                _ => Err("the access log was off at start; turning it on needs a restart".into()),
            };
        };
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        tx.send(Msg::Reopen(target.clone(), ack_tx))
            .map_err(|_| "the access-log thread has stopped".to_string())?;
        let r = ack_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "the access-log thread did not answer within 5 s".to_string())?;
        if r.is_ok() {
            self.on
                .store(!matches!(target, AccessLogTarget::Off), Ordering::Relaxed);
        }
        r
    }

    pub(crate) fn write(&self, rec: &Record) {
        let Some(tx) = &self.tx else { return };
        let Ok(line) = serde_json::to_string(rec) else {
            return;
        };
        match tx.try_send(Msg::Line(line)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.inc();
            }
        }
    }

    /// Blocks until everything sent so far is written (tests, shutdown).
    pub(crate) fn flush(&self) {
        let Some(tx) = &self.tx else { return };
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        if tx.send(Msg::Flush(ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(Duration::from_secs(5));
        }
    }
}

/// Unix milliseconds as RFC 3339 UTC with milliseconds (`2024-05-01T12:00:00.123Z`); the
/// time comes from the engine's clock (`crate::wall`), never from the system here.
pub(crate) fn rfc3339_ms(unix_ms: u64) -> String {
    rfc3339(unix_ms / 1000, (unix_ms % 1000) as u32)
}

/// `secs.millis` since the epoch as RFC 3339 UTC with milliseconds.
pub(crate) fn rfc3339(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    let (y, m, d) = weir_core::quota::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_714_564_800, 123), "2024-05-01T12:00:00.123Z");
    }

    #[test]
    fn file_sink_writes_and_flushes() {
        let dir = tempfile::Builder::new()
            .prefix("weir-log-")
            .tempdir()
            .unwrap();
        let p = dir.path().join("a.log");
        let log = AccessLog::start(&AccessLogTarget::File(p.clone()), Counter::default()).unwrap();
        let rec = Record {
            ts: rfc3339_ms(1_714_564_800_123),
            request_id: "r1".into(),
            instance: "i".into(),
            route: "ok".into(),
            method: "GET".into(),
            path: "/ok".into(),
            client: None,
            status: 200,
            reason: None,
            key_digest: None,
            consumer_digest: None,
            scope: None,
            remaining: Some(1),
            attempts: vec![AttemptRec {
                status: Some(200),
                error: None,
                ms: 3,
                endpoint: Some("127.0.0.1:18181".to_string()),
            }],
            queue_ms: 0,
            duration_ms: 3,
            revision: 1,
            shadow: None,
            ratelimit: None,
            error: None,
        };
        log.write(&rec);
        log.flush();
        let text = std::fs::read_to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["attempts"][0]["status"], 200);
        assert_eq!(v["route"], "ok");
        assert!(v.get("shadow").is_none());
    }
}
