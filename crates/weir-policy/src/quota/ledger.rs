//! The local quota ledger: one append-only file per route and period
//! (`DIR/<route>/<period>.ledger`), one checksummed JSON event per line, written by the
//! ledger's own thread with group commit, recovery on open, and the in-memory state of
//! the current period's keys.
//!
//! # Format
//! Each record is one line: the CRC-32 (IEEE, `crc32fast`) of the JSON text as 8 lowercase
//! hex digits, a space, the JSON event (the docs/CONFIG.md fields: `ts`, `period`, `route`,
//! `key_digest`, `event_id`, `kind`, `amount`, `revision`, `instance`), a newline. Lines
//! are readable with `cut -c10-` and the checksum catches torn and flipped bytes.
//!
//! # Why a hand-written log
//! An embedded store (sled, redb, fjall) would bring its own file format, compaction and
//! background threads for what is here an append-only list that is read back whole once
//! per period: the ledger must be a *reconcilable record* a person can read and an
//! auditor can recompute (`ledger_sum`), one file per period so a closed period is a file
//! to archive. The log is appended by one writer thread per ledger: each batch — whatever
//! events are queued when it wakes — is one `write(2)` on a file opened for append, plus
//! one `fdatasync` per batch (`sync = "always"`: group commit, every request of the batch
//! shares it) or once per interval (`sync = "1s"`).
//!
//! # Threads
//! A request thread (an io_uring worker of weir-gateway, a Pingora task) never writes or
//! syncs a file and takes no lock the whole route shares:
//! - A key's state (used, pending, adjusted, the hashes of its event ids) lives in one of
//!   [`SHARDS`] shards, each a `Mutex<HashMap>`, picked by a keyed hash of the digest. Two
//!   keys contend only when they share a shard (1 in 64), and then only for the few
//!   instructions of a reservation or a commit. Atomics alone would not do: a
//!   reservation checks used + pending against the limit and the event id against the
//!   key's ids in one step. The hashes are keyed (seeded from the process's random `std`
//!   keys) because digests are public SipHash values a client could aim at one shard.
//! - A commit changes its key's state and hands the record to the writer over a std
//!   `mpsc` channel (the workspace has no other channel crate), both under the shard's
//!   lock, so a key's records reach the file in the order its state changed. The writer
//!   takes whatever is queued (at most [`MAX_BATCH`] messages), makes the lines
//!   (timestamp, JSON, checksum: none of it on the request thread; [`push_line`] copies
//!   the repeated fields as text made once), writes them with one
//!   `write(2)` per file, syncs when the batch asks for it, then acknowledges whoever
//!   waits.
//! - `sync = "1s"`: the request only hands its record over; a record that finds the writer
//!   idle wakes it, and the writer waits [`GATHER`] (1 ms) for more before writing, so a
//!   busy route costs one wake-up and one `write(2)` per millisecond rather than per
//!   request. `sync = "always"`: the request waits for the acknowledgement, sent after
//!   the batch's `fdatasync`. That wait blocks
//!   the request thread on a channel `recv`: the commit runs in `Flow::on_attempt`, which
//!   the engine API makes synchronous (it returns `Next` with the headers to forward; there
//!   is no await point between the upstream's answer and the response the frontend
//!   writes), so there is no future to hand the frontend. The wait is the fsync the thread
//!   used to do itself, but it is shared by every request of the batch and no longer
//!   behind a route-wide lock.
//! - The exception is the period rollover, once per period: the first request that sees
//!   the period end asks the writer to sync the old file and open the new one, and waits
//!   for its events; requests whose shard is still in the old period wait for that too.
//! - Dropping the ledger (a reload that replaces it, shutdown) writes and syncs what is
//!   queued and joins the writer. Admin reads ([`RouteLedger::report`],
//!   [`RouteLedger::events`]) first wait until the writer has written everything handed to
//!   it before, so `ledger_sum` counts every committed event.
//!
//! What handing over costs, `sync = "1s"`: a process crash loses the records still queued
//! for the writer — about the last millisecond's ([`GATHER`] and the write), possibly
//! some whose response went out (before, each was written before its response).
//! `sync = "always"` loses nothing acknowledged: no response goes out before its record
//! is on disk.
//!
//! # Recovery
//! [`scan`] reads a file: a last record that is cut short or fails its checksum (a write
//! torn by a crash) is dropped — the file is truncated to the last good record and a notice
//! says so; a bad record followed by good ones is corruption, and opening refuses with the
//! file and byte offset. Memory holds only the current period's keys (used, pending,
//! adjusted, and the hashes of their event ids); closed periods are their files.

use crate::text::HeaderText;
use arc_swap::ArcSwapOption;
use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher13;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use weir_core::{Period, PeriodId, QuotaCount};

use super::layer::SyncPolicy;

/// What an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    /// A request consumed `amount` units.
    Consume,
    /// A signed credit (positive) or debit of the period's limit.
    Adjust,
    /// A request admitted while the store was down (global scope).
    Bypass,
}

/// One ledger record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Event {
    pub ts: String,
    pub period: String,
    pub route: String,
    pub key_digest: String,
    pub event_id: Option<String>,
    pub kind: Kind,
    pub amount: i64,
    pub revision: u64,
    pub instance: String,
}

/// Why a ledger file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Corrupt {
    /// Byte offset of the bad record.
    pub offset: u64,
    /// What is wrong with it.
    pub what: &'static str,
}

/// What [`scan`] found in a file.
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    pub events: Vec<Event>,
    /// Bytes up to the end of the last good record.
    pub good_len: u64,
    /// A torn last record was found at `good_len` (its length in bytes).
    pub torn: Option<u64>,
}

/// One record as a line (checksum, space, JSON, newline).
pub(crate) fn frame(e: &Event) -> Vec<u8> {
    let json = serde_json::to_vec(e).unwrap_or_default();
    let mut out = Vec::with_capacity(json.len() + 10);
    out.extend_from_slice(format!("{:08x} ", crc32fast::hash(&json)).as_bytes());
    out.extend_from_slice(&json);
    out.push(b'\n');
    out
}

/// Appends `e`'s line to `out` — the same bytes as [`frame`] (a test holds them equal),
/// for the writer thread: the fields it repeats (route, instance, timestamp, period) come
/// in as JSON text made once, so a record costs a few copies, one number or two and the
/// checksum instead of a serializer pass and its allocations.
fn push_line(out: &mut Vec<u8>, f: &LineFields<'_>) {
    let at = out.len();
    out.extend_from_slice(b"00000000 ");
    let json = out.len();
    out.extend_from_slice(b"{\"ts\":");
    out.extend_from_slice(f.ts.as_bytes());
    out.extend_from_slice(b",\"period\":");
    out.extend_from_slice(f.period.as_bytes());
    out.extend_from_slice(b",\"route\":");
    out.extend_from_slice(f.route.as_bytes());
    out.extend_from_slice(b",\"key_digest\":\"");
    let mut hex = [0u8; 32];
    for (i, b) in hex.iter_mut().enumerate() {
        let nibble = (f.digest >> (124 - 4 * i)) as u8 & 0xf;
        *b = b"0123456789abcdef"[usize::from(nibble)];
    }
    out.extend_from_slice(&hex);
    out.extend_from_slice(b"\",\"event_id\":");
    match f.event_id {
        None => out.extend_from_slice(b"null"),
        Some(id) => json_str(out, id),
    }
    out.extend_from_slice(match f.kind {
        Kind::Consume => b",\"kind\":\"consume\",\"amount\":".as_slice(),
        Kind::Adjust => b",\"kind\":\"adjust\",\"amount\":".as_slice(),
        Kind::Bypass => b",\"kind\":\"bypass\",\"amount\":".as_slice(),
    });
    out.extend_from_slice(itoa::Buffer::new().format(f.amount).as_bytes());
    out.extend_from_slice(b",\"revision\":");
    out.extend_from_slice(itoa::Buffer::new().format(f.revision).as_bytes());
    out.extend_from_slice(b",\"instance\":");
    out.extend_from_slice(f.instance.as_bytes());
    out.push(b'}');
    let crc = format!("{:08x}", crc32fast::hash(&out[json..]));
    out[at..at + 8].copy_from_slice(crc.as_bytes());
    out.push(b'\n');
}

/// [`push_line`] of `e`, for the test that holds it equal to [`frame`].
#[cfg(test)]
pub(crate) fn line_of(e: &Event, digest: u128) -> Vec<u8> {
    let mut out = Vec::new();
    push_line(
        &mut out,
        &LineFields {
            ts: &json_text(&e.ts),
            period: &json_text(&e.period),
            route: &json_text(&e.route),
            digest,
            event_id: e.event_id.as_deref(),
            kind: e.kind,
            amount: e.amount,
            revision: e.revision,
            instance: &json_text(&e.instance),
        },
    );
    out
}

/// `s` as a JSON string, escaped as `serde_json` escapes it.
fn json_str(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *out, s);
}

/// `s` as JSON string text.
fn json_text(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// One record's fields for [`push_line`]: `ts`, `period`, `route` and `instance` as JSON
/// string text (quoted, escaped).
struct LineFields<'a> {
    ts: &'a str,
    period: &'a str,
    route: &'a str,
    digest: u128,
    event_id: Option<&'a str>,
    kind: Kind,
    amount: i64,
    revision: u64,
    instance: &'a str,
}

fn parse_line(line: &[u8]) -> Result<Event, &'static str> {
    if line.len() < 10 || line[8] != b' ' {
        return Err("no checksum");
    }
    let crc = core::str::from_utf8(&line[..8])
        .ok()
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or("bad checksum field")?;
    let json = &line[9..];
    if crc32fast::hash(json) != crc {
        return Err("checksum mismatch");
    }
    serde_json::from_slice(json).map_err(|_| "not an event")
}

/// Reads a whole file's bytes (see the module docs, "Recovery"). Never panics.
pub(crate) fn scan(bytes: &[u8]) -> Result<Scanned, Corrupt> {
    let mut out = Scanned::default();
    let mut pos = 0usize;
    let mut bad: Option<Corrupt> = None;
    while pos < bytes.len() {
        let (line, next) = match bytes[pos..].iter().position(|&b| b == b'\n') {
            Some(n) => (&bytes[pos..pos + n], pos + n + 1),
            None => (&bytes[pos..], bytes.len()),
        };
        let complete = next <= bytes.len() && bytes.get(next - 1) == Some(&b'\n');
        let parsed = if complete {
            parse_line(line)
        } else {
            Err("cut short")
        };
        match parsed {
            Ok(e) => {
                // A good record after a bad one: the bad one was not a torn tail.
                if let Some(b) = bad {
                    return Err(b);
                }
                out.events.push(e);
                out.good_len = next as u64;
            }
            Err(what) => {
                if bad.is_none() {
                    bad = Some(Corrupt {
                        offset: pos as u64,
                        what,
                    });
                }
            }
        }
        pos = next;
    }
    if bad.is_some() {
        out.torn = Some(bytes.len() as u64 - out.good_len);
    }
    Ok(out)
}

/// The hash an event id is remembered by (per kind: a consume and an adjust may share
/// an id). Keyed SipHash: ids come from clients.
fn id_hash(kind: Kind, id: &str) -> u64 {
    let mut h = SipHasher13::new_with_keys(0x7765_6972_2d71_756f, 0x7461_2d69_6473_0001);
    h.write_u8(kind as u8);
    h.write(id.as_bytes());
    h.finish()
}

/// A key's state in the current period.
#[derive(Default)]
struct KeyState {
    count: QuotaCount,
    /// Event ids seen (consume and adjust, see [`id_hash`]).
    ids: HashSet<u64>,
}

impl KeyState {
    fn apply(&mut self, e: &Event) {
        if let Some(id) = &e.event_id {
            self.ids.insert(id_hash(e.kind, id));
        }
        match e.kind {
            Kind::Consume | Kind::Bypass => self.count.used += e.amount.max(0) as u64,
            Kind::Adjust => self.count.adjust(e.amount),
        }
    }
}

/// Shards of a ledger's in-memory key state (a power of two).
const SHARDS: usize = 64;

/// Most messages the writer takes into one batch (one `write(2)` per file, one
/// `fdatasync`): bounds the memory a batch holds under a flood, not the batching itself.
const MAX_BATCH: usize = 4096;

/// `sync = "1s"`: how long a record that finds the writer idle waits for more before the
/// batch is written (see [`Appender::run`]); a process crash can lose this much.
const GATHER: Duration = Duration::from_millis(1);

/// One shard of the current period's keys.
struct Shard {
    /// The period these keys belong to (every shard rolls over together, see
    /// [`RouteLedger::roll`]).
    id: PeriodId,
    keys: HashMap<u128, KeyState, ahash::RandomState>,
}

/// The writer's answer to a record or barrier that waits for it: written (and synced when
/// asked), or why not.
type Ack = SyncSender<Result<(), String>>;

/// A record on its way to the writer: the event's parts. The writer makes the event's
/// text (timestamp, JSON, checksum), so the request thread pays for none of it.
struct Rec {
    period: PeriodId,
    digest: u128,
    kind: Kind,
    amount: i64,
    event_id: Option<String>,
    revision: u64,
    /// The writer's instance name when it is not the ledger's usual one
    /// ([`RouteLedger::instance`]): no allocation per request.
    instance: Option<String>,
    unix: u64,
    /// `fdatasync` before acknowledging, whatever the sync setting (adjustments, a
    /// closed period's file).
    durable: bool,
    ack: Option<Ack>,
}

impl Rec {
    /// A record of `kind` for key `digest` in `period`, written by `w` (not durable by
    /// itself, no acknowledgement).
    fn new(
        period: PeriodId,
        digest: u128,
        kind: Kind,
        amount: i64,
        event_id: Option<String>,
        w: Writer<'_>,
    ) -> Rec {
        Rec {
            period,
            digest,
            kind,
            amount,
            event_id,
            revision: w.revision,
            instance: None,
            unix: w.unix,
            durable: false,
            ack: None,
        }
    }

    /// The same, synced before it is acknowledged.
    fn durable(self) -> Rec {
        Rec {
            durable: true,
            ..self
        }
    }
}

/// What the writer thread is asked to do, in the order asked.
enum Msg {
    Rec(Rec),
    /// Answered once everything sent before it is written (and with `sync`, on disk).
    Barrier {
        sync: bool,
        ack: Ack,
    },
    /// Period rollover: write and sync what is queued, then open (recovering) the file of
    /// period `id` and send back its events.
    Load {
        id: PeriodId,
        reply: SyncSender<Result<Vec<Event>, String>>,
    },
    /// The ledger is dropped: write and sync what is queued, then end.
    Stop,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Opens (creating) and recovers `path`: the file (for appending), its length, its events,
/// and a notice when a torn last record was dropped.
fn open_recovering(path: &Path) -> Result<(File, u64, Vec<Event>, Option<String>), String> {
    let shown = path.display().to_string();
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| format!("{shown}: cannot open: {e}"))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let s = scan(&bytes).map_err(|c| {
        format!(
            "{shown}: corrupt ledger record at byte {} ({}); refusing to start (move the file away or repair it)",
            c.offset, c.what
        )
    })?;
    let mut notice = None;
    if let Some(n) = s.torn {
        file.set_len(s.good_len)
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("{shown}: cannot drop a torn record: {e}"))?;
        notice = Some(format!(
            "quota ledger {shown}: dropped a torn last record at byte {} ({n} bytes)",
            s.good_len
        ));
    }
    Ok((file, s.good_len, s.events, notice))
}

/// A period file the writer has open.
struct OpenFile {
    name: String,
    file: File,
    /// Bytes in the file (a failed write is cut back to this).
    len: u64,
    /// Written since the last `fdatasync`.
    dirty: bool,
}

/// What one batch writes: the bytes per file (in the order received) and who waits.
#[derive(Default)]
struct Batch {
    bufs: Vec<(String, Vec<u8>)>,
    acks: Vec<Ack>,
    /// Records of the batch in `bufs`.
    records: u64,
    sync: bool,
}

/// The writer thread of one ledger: the only code that writes or syncs its files.
struct Appender {
    dir: PathBuf,
    sync: SyncPolicy,
    files: Vec<OpenFile>,
    last_sync: Instant,
    /// The period name of the last record (most records share it), and as JSON text.
    last_name: Option<(PeriodId, String, String)>,
    /// The timestamp text of the last record's second (JSON text).
    last_ts: (u64, String),
    /// The route as JSON text.
    route_json: String,
    /// The ledger's usual instance name (see [`RouteLedger::instance`]) as JSON text, once
    /// known.
    instance: Arc<OnceLock<String>>,
    instance_json: Option<String>,
    /// Records written and covered by a finished `fdatasync` (tests read it).
    durable: Arc<AtomicU64>,
    /// Records written, not yet covered by an `fdatasync`.
    unsynced: u64,
}

impl Appender {
    fn run(mut self, rx: Receiver<Msg>) {
        let mut batch = Vec::new();
        loop {
            let first = match self.sync {
                SyncPolicy::Every(d) if self.dirty() => {
                    match rx.recv_timeout(d.saturating_sub(self.last_sync.elapsed())) {
                        Ok(m) => Some(m),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => Some(Msg::Stop),
                    }
                }
                _ => Some(rx.recv().unwrap_or(Msg::Stop)),
            };
            if let Some(m) = first {
                // `sync = "1s"`: a record that woke the writer waits a moment for company,
                // so a busy route costs one wake-up and one `write(2)` per moment, not
                // per request (what waits for an answer is handled at once).
                if matches!(self.sync, SyncPolicy::Every(_))
                    && matches!(&m, Msg::Rec(r) if r.ack.is_none())
                {
                    std::thread::sleep(GATHER);
                }
                batch.push(m);
                while batch.len() < MAX_BATCH
                    && let Ok(m) = rx.try_recv()
                {
                    batch.push(m);
                }
                if self.handle(&mut batch) {
                    return;
                }
            }
            if let SyncPolicy::Every(d) = self.sync
                && self.dirty()
                && self.last_sync.elapsed() >= d
            {
                let _ = self.sync_dirty();
            }
        }
    }

    fn dirty(&self) -> bool {
        self.files.iter().any(|f| f.dirty)
    }

    /// Handles one batch; `true` when the ledger stopped.
    fn handle(&mut self, msgs: &mut Vec<Msg>) -> bool {
        let mut b = Batch::default();
        for m in msgs.drain(..) {
            match m {
                Msg::Rec(r) => self.add(&mut b, r),
                Msg::Barrier { sync, ack } => {
                    b.sync |= sync;
                    b.acks.push(ack);
                }
                Msg::Load { id, reply } => {
                    b.sync = true;
                    self.commit(&mut b);
                    let _ = reply.send(self.load(id));
                }
                Msg::Stop => {
                    b.sync = true;
                    self.commit(&mut b);
                    return true;
                }
            }
        }
        self.commit(&mut b);
        false
    }

    /// Adds a record's line to the batch.
    fn add(&mut self, b: &mut Batch, r: Rec) {
        b.sync |= r.durable || self.sync == SyncPolicy::Always;
        if !matches!(&self.last_name, Some((id, _, _)) if *id == r.period) {
            let name = r.period.to_string();
            let text = json_text(&name);
            self.last_name = Some((r.period, name, text));
        }
        if self.last_ts.0 != r.unix || self.last_ts.1.is_empty() {
            self.last_ts = (r.unix, json_text(&crate::accesslog::rfc3339(r.unix, 0)));
        }
        if self.instance_json.is_none() {
            self.instance_json = self.instance.get().map(|s| json_text(s));
        }
        let other;
        let instance = match &r.instance {
            Some(o) => {
                other = json_text(o);
                &other
            }
            None => self.instance_json.as_deref().unwrap_or("\"\""),
        };
        let Some((_, name, period)) = &self.last_name else {
            return;
        };
        let fields = LineFields {
            ts: &self.last_ts.1,
            period,
            route: &self.route_json,
            digest: r.digest,
            event_id: r.event_id.as_deref(),
            kind: r.kind,
            amount: r.amount,
            revision: r.revision,
            instance,
        };
        match b.bufs.iter_mut().find(|(n, _)| n == name) {
            Some((_, buf)) => push_line(buf, &fields),
            None => {
                let mut buf = Vec::with_capacity(256);
                push_line(&mut buf, &fields);
                b.bufs.push((name.clone(), buf));
            }
        }
        b.records += 1;
        b.acks.extend(r.ack);
    }

    /// Writes the batch (one `write(2)` per file), syncs when it asks to, and answers
    /// everyone waiting on it with the batch's outcome.
    fn commit(&mut self, b: &mut Batch) {
        let mut res = Ok(());
        for (name, bytes) in b.bufs.drain(..) {
            if let Err(e) = self.append(&name, &bytes) {
                res = Err(e);
            }
        }
        self.unsynced += b.records;
        b.records = 0;
        if b.sync
            && let Err(e) = self.sync_dirty()
        {
            res = Err(e);
        }
        b.sync = false;
        for a in b.acks.drain(..) {
            let _ = a.send(res.clone());
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        RouteLedger::path_of(&self.dir, name)
    }

    /// Appends `bytes` to period file `name` (opened and recovered first if need be). A
    /// write that fails part way is cut back, so the file never holds half a record
    /// followed by good ones.
    fn append(&mut self, name: &str, bytes: &[u8]) -> Result<(), String> {
        let i = match self.files.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                let (file, len, _, _) = open_recovering(&self.path(name))?;
                self.files.push(OpenFile {
                    name: name.to_string(),
                    file,
                    len,
                    dirty: false,
                });
                self.files.len() - 1
            }
        };
        let f = &mut self.files[i];
        match (&f.file).write_all(bytes) {
            Ok(()) => {
                f.len += bytes.len() as u64;
                f.dirty = true;
                Ok(())
            }
            Err(e) => {
                let _ = f.file.set_len(f.len);
                Err(format!("{}: cannot append: {e}", self.path(name).display()))
            }
        }
    }

    /// One `fdatasync` per file written since the last one.
    fn sync_dirty(&mut self) -> Result<(), String> {
        let mut res = Ok(());
        for f in self.files.iter_mut().filter(|f| f.dirty) {
            match f.file.sync_data() {
                Ok(()) => f.dirty = false,
                Err(e) => res = Err(format!("{}.ledger: cannot sync: {e}", f.name)),
            }
        }
        self.last_sync = Instant::now();
        if res.is_ok() {
            self.durable.fetch_add(self.unsynced, Ordering::Release);
            self.unsynced = 0;
        }
        res
    }

    /// The rollover to period `id`: the other files are closed (the batch before was
    /// synced), the new one opened and recovered, its events sent back.
    fn load(&mut self, id: PeriodId) -> Result<Vec<Event>, String> {
        let name = id.to_string();
        self.files.clear();
        let (file, len, events, _) = open_recovering(&self.path(&name))?;
        self.files.push(OpenFile {
            name,
            file,
            len,
            dirty: false,
        });
        Ok(events)
    }
}

/// A reservation taken at the quota gate, settled by [`RouteLedger::commit`] or
/// [`RouteLedger::release`].
#[derive(Debug, Clone)]
pub(crate) struct Ticket {
    period_start: u64,
    digest: u128,
    cost: u64,
    event_id: Option<String>,
}

/// The gate's answer.
#[derive(Debug)]
pub(crate) enum Reserved {
    /// Units reserved; `remaining` after this request.
    Taken(Ticket, u64),
    /// The event id was already consumed this period: passes, consumes nothing.
    Duplicate(u64),
    /// Does not fit; `remaining` now.
    Exhausted(u64),
}

/// Who writes an event (the ledger's `revision` and `instance` fields).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writer<'a> {
    pub revision: u64,
    pub instance: &'a str,
    /// Unix seconds now (the event's `ts` and period).
    pub unix: u64,
}

/// A key's state as the admin API reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyReport {
    pub period: String,
    pub count: QuotaCount,
    /// `consume` + `bypass` amounts of the key, recomputed from the file.
    pub ledger_sum: u64,
}

/// One route's ledger (kept across reloads while its directory and period are unchanged).
pub(crate) struct RouteLedger {
    route: String,
    dir: PathBuf,
    period: Period,
    sync: SyncPolicy,
    /// The current period's keys, by a keyed hash of the digest.
    shards: Box<[Mutex<Shard>]>,
    /// Picks a key's shard.
    shard_hash: ahash::RandomState,
    /// The shards' maps (seeded apart from `shard_hash`: a shard's keys share its bits).
    map_hash: ahash::RandomState,
    /// Start of the period the shards hold; held while they roll over.
    rolled: Mutex<u64>,
    /// The instance name of the first record handed over: records with it carry none (the
    /// writer knows it), so a request allocates nothing for it; a reload that renames the
    /// instance makes its records carry their own.
    instance: Arc<OnceLock<String>>,
    /// The quota's `RateLimit-Policy` item for a period start and limit, made once per
    /// period instead of formatted per request (see [`RouteLedger::policy_item`]).
    policy_item: ArcSwapOption<(u64, u64, HeaderText)>,
    /// To the writer thread.
    tx: Sender<Msg>,
    writer: Option<JoinHandle<()>>,
    /// Records on disk (see [`Appender::durable`]).
    #[cfg(test)]
    durable: Arc<AtomicU64>,
    /// Global scope: `bypass` events not yet written to the store (oldest first). Filled
    /// by [`RouteLedger::record_bypass`] and, on open, from the current period's file
    /// (writing one back again is harmless: the store dedupes by event id).
    pending: Mutex<Vec<Event>>,
    /// `pending.len()`, read without the lock on every global-quota request.
    pending_len: AtomicUsize,
    /// One request at a time writes pending events back.
    writing_back: AtomicBool,
}

/// The write-back turn; ends when dropped.
pub(crate) struct WriteBackTurn<'a>(&'a AtomicBool);

impl Drop for WriteBackTurn<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// `route` as a file name: ASCII letters, digits, `-` and `_` kept, every other byte
/// `%XX` (route ids may contain `/` or `.`).
fn file_name(route: &str) -> String {
    let mut s = String::with_capacity(route.len());
    for b in route.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// The digest as the ledger writes it (32 hex digits, as the access log).
pub(crate) fn digest_hex(d: u128) -> String {
    format!("{d:032x}")
}

/// Two hash seeds from the process's random `std` keys (ahash is built without its own
/// random source here): digests are public SipHash values a client can aim, so the shard
/// and map hashes must be keyed.
fn hashers() -> (ahash::RandomState, ahash::RandomState) {
    let s = std::collections::hash_map::RandomState::new();
    let k = |i: u64| s.hash_one(i);
    (
        ahash::RandomState::with_seeds(k(0), k(1), k(2), k(3)),
        ahash::RandomState::with_seeds(k(4), k(5), k(6), k(7)),
    )
}

impl RouteLedger {
    /// Opens (creating) `dir/<route>/`, recovers the current period's file and starts the
    /// ledger's writer thread. Returns the ledger and the notices recovery has for the
    /// operator.
    pub(crate) fn open(
        dir: &Path,
        route: &str,
        period: Period,
        sync: SyncPolicy,
        unix: u64,
    ) -> Result<(Arc<RouteLedger>, Vec<String>), String> {
        let dir = dir.join(file_name(route));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
        let id = period.at(unix);
        let name = id.to_string();
        let (file, len, events, notice) = open_recovering(&Self::path_of(&dir, &name))?;
        let (shard_hash, map_hash) = hashers();
        let durable = Arc::new(AtomicU64::new(0));
        let instance = Arc::new(OnceLock::new());
        let (tx, rx) = std::sync::mpsc::channel();
        let appender = Appender {
            dir: dir.clone(),
            sync,
            files: vec![OpenFile {
                name,
                file,
                len,
                dirty: false,
            }],
            last_sync: Instant::now(),
            last_name: None,
            last_ts: (0, String::new()),
            route_json: json_text(route),
            instance: instance.clone(),
            instance_json: None,
            durable: durable.clone(),
            unsynced: 0,
        };
        let writer = std::thread::Builder::new()
            .name("weir-quota-ledger".into())
            .spawn(move || appender.run(rx))
            .map_err(|e| format!("{}: cannot start the ledger writer: {e}", dir.display()))?;
        let pending: Vec<Event> = events
            .iter()
            .filter(|e| e.kind == Kind::Bypass)
            .cloned()
            .collect();
        let l = RouteLedger {
            route: route.to_string(),
            dir,
            period,
            sync,
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        id,
                        keys: HashMap::with_hasher(map_hash.clone()),
                    })
                })
                .collect(),
            shard_hash,
            map_hash,
            rolled: Mutex::new(id.start),
            instance,
            policy_item: ArcSwapOption::empty(),
            tx,
            writer: Some(writer),
            #[cfg(test)]
            durable,
            pending_len: AtomicUsize::new(pending.len()),
            pending: Mutex::new(pending),
            writing_back: AtomicBool::new(false),
        };
        l.fill(id, &events);
        Ok((Arc::new(l), notice.into_iter().collect()))
    }

    /// Whether this ledger serves a quota in `dir` cut by `period` with `sync`.
    pub(crate) fn serves(&self, dir: &Path, route: &str, period: Period, sync: SyncPolicy) -> bool {
        self.dir == dir.join(file_name(route)) && self.period == period && self.sync == sync
    }

    fn path_of(dir: &Path, name: &str) -> PathBuf {
        dir.join(format!("{name}.ledger"))
    }

    fn shard_index(&self, digest: u128) -> usize {
        self.shard_hash.hash_one(digest) as usize & (SHARDS - 1)
    }

    fn shard(&self, digest: u128) -> MutexGuard<'_, Shard> {
        lock(&self.shards[self.shard_index(digest)])
    }

    /// Sets every shard to period `id` holding the keys of `events`.
    fn fill(&self, id: PeriodId, events: &[Event]) {
        let mut parts: Vec<HashMap<u128, KeyState, ahash::RandomState>> = (0..SHARDS)
            .map(|_| HashMap::with_hasher(self.map_hash.clone()))
            .collect();
        for e in events {
            let Ok(d) = u128::from_str_radix(&e.key_digest, 16) else {
                continue;
            };
            parts[self.shard_index(d)].entry(d).or_default().apply(e);
        }
        for (m, keys) in self.shards.iter().zip(parts) {
            let mut s = lock(m);
            s.id = id;
            s.keys = keys;
        }
    }

    /// The period rollover (once per period, by the first request that sees it end): the
    /// writer syncs and closes the old file and reads the new one, then every shard
    /// takes the new period's keys. Requests on other shards go on meanwhile; one that
    /// finds its shard still in the old period waits here until the rollover is done.
    fn roll(&self, unix: u64) -> Result<(), String> {
        let want = self.period.at(unix);
        let mut at = lock(&self.rolled);
        if *at >= want.start {
            return Ok(());
        }
        let (reply, rx) = sync_channel(1);
        self.send(Msg::Load { id: want, reply })?;
        let events = rx.recv().map_err(|_| self.stopped())??;
        self.fill(want, &events);
        *at = want.start;
        Ok(())
    }

    /// The shard of `digest` in the period containing `unix`, rolling over when a period
    /// ended (a `unix` before the current period uses the current period).
    fn shard_at(&self, digest: u128, unix: u64) -> Result<MutexGuard<'_, Shard>, String> {
        loop {
            let s = self.shard(digest);
            if unix < s.id.end || self.period.at(unix).start <= s.id.start {
                return Ok(s);
            }
            drop(s);
            self.roll(unix)?;
        }
    }

    fn stopped(&self) -> String {
        format!("{}: the ledger writer stopped", self.dir.display())
    }

    fn send(&self, m: Msg) -> Result<(), String> {
        self.tx.send(m).map_err(|_| self.stopped())
    }

    /// Hands record `r` to the writer; with `wait`, returns the receiver of its
    /// acknowledgement (sent once the record is written and, when `r.durable` or
    /// `sync = "always"`, on disk).
    fn hand_over(
        &self,
        mut r: Rec,
        w: Writer<'_>,
        wait: bool,
    ) -> Result<Option<Receiver<Result<(), String>>>, String> {
        if self.instance.get_or_init(|| w.instance.to_string()) != w.instance {
            r.instance = Some(w.instance.to_string());
        }
        let rx = if wait {
            let (a, rx) = sync_channel(1);
            r.ack = Some(a);
            Some(rx)
        } else {
            None
        };
        self.send(Msg::Rec(r))?;
        Ok(rx)
    }

    /// Waits for an acknowledgement from [`RouteLedger::hand_over`] (none: nothing to wait
    /// for).
    fn await_ack(&self, rx: Option<Receiver<Result<(), String>>>) -> Result<(), String> {
        match rx {
            None => Ok(()),
            Some(rx) => rx.recv().map_err(|_| self.stopped())?,
        }
    }

    /// Everything handed over before this call is written (`sync`: and on disk).
    fn barrier(&self, sync: bool) -> Result<(), String> {
        let (ack, rx) = sync_channel(1);
        self.send(Msg::Barrier { sync, ack })?;
        rx.recv().map_err(|_| self.stopped())?
    }

    /// The `RateLimit-Policy` item of period `p` under `limit`: the one made for them
    /// before, or `make`'s (kept for the next requests).
    pub(crate) fn policy_item(
        &self,
        p: PeriodId,
        limit: u64,
        make: impl FnOnce() -> HeaderText,
    ) -> HeaderText {
        if let Some(c) = &*self.policy_item.load()
            && c.0 == p.start
            && c.1 == limit
        {
            return c.2.clone();
        }
        let t = make();
        self.policy_item
            .store(Some(Arc::new((p.start, limit, t.clone()))));
        t
    }

    /// The current period at `unix`.
    pub(crate) fn period_at(&self, unix: u64) -> PeriodId {
        self.period.at(unix)
    }

    /// The quota gate for key `digest`: duplicate, reserve `cost`, or exhausted.
    pub(crate) fn reserve(
        &self,
        digest: u128,
        limit: u64,
        cost: u64,
        event_id: Option<&str>,
        unix: u64,
    ) -> Result<(Reserved, PeriodId), String> {
        let mut s = self.shard_at(digest, unix)?;
        let id = s.id;
        let k = s.keys.entry(digest).or_default();
        if let Some(e) = event_id
            && k.ids.contains(&id_hash(Kind::Consume, e))
        {
            return Ok((Reserved::Duplicate(k.count.remaining(limit)), id));
        }
        let d = k.count.reserve(limit, cost);
        let r = if d.allowed {
            Reserved::Taken(
                Ticket {
                    period_start: id.start,
                    digest,
                    cost,
                    event_id: event_id.map(str::to_string),
                },
                d.remaining,
            )
        } else {
            Reserved::Exhausted(d.remaining)
        };
        Ok((r, id))
    }

    /// Gives a reservation back.
    pub(crate) fn release(&self, t: &Ticket) {
        let mut s = self.shard(t.digest);
        if s.id.start == t.period_start
            && let Some(k) = s.keys.get_mut(&t.digest)
        {
            k.count.release(t.cost);
        }
    }

    /// Turns a reservation into a `consume` event handed to the writer; with
    /// `sync = "always"` this returns once the event is on disk (a blocking wait: see the
    /// module docs, "Threads"). `Ok(false)`: the event id was consumed meanwhile (a
    /// duplicate: nothing written).
    pub(crate) fn commit(&self, t: &Ticket, w: Writer<'_>) -> Result<bool, String> {
        let always = self.sync == SyncPolicy::Always;
        let mut s = self.shard(t.digest);
        if s.id.start != t.period_start {
            // The period closed while the request was in flight: the unit belongs to the
            // period that admitted it, whose file gets it (synced).
            drop(s);
            let period = self.period.at(t.period_start);
            let r = Rec::new(
                period,
                t.digest,
                Kind::Consume,
                t.cost as i64,
                t.event_id.clone(),
                w,
            );
            let rx = self.hand_over(r.durable(), w, always)?;
            return self.await_ack(rx).map(|()| true);
        }
        let id = s.id;
        let k = s.keys.entry(t.digest).or_default();
        if let Some(e) = &t.event_id
            && !k.ids.insert(id_hash(Kind::Consume, e))
        {
            k.count.release(t.cost);
            return Ok(false);
        }
        k.count.commit(t.cost);
        // Handed over under the shard's lock: a key's events reach the writer in the
        // order its state changed.
        let r = Rec::new(
            id,
            t.digest,
            Kind::Consume,
            t.cost as i64,
            t.event_id.clone(),
            w,
        );
        let rx = self.hand_over(r, w, always)?;
        drop(s);
        self.await_ack(rx).map(|()| true)
    }

    /// An `adjust` event for key `digest` in period `period` (`None`: the current one),
    /// idempotent by `event_id`, on disk before this returns (whatever the sync setting);
    /// returns whether it was new, and the key's report.
    pub(crate) fn adjust(
        &self,
        digest: u128,
        amount: i64,
        event_id: &str,
        period: Option<PeriodId>,
        w: Writer<'_>,
    ) -> Result<(bool, KeyReport), String> {
        let mut s = self.shard_at(digest, w.unix)?;
        let target = period.unwrap_or(s.id);
        let h = id_hash(Kind::Adjust, event_id);
        let id = Some(event_id.to_string());
        let fresh = if target.start == s.id.start {
            let k = s.keys.entry(digest).or_default();
            let fresh = k.ids.insert(h);
            let rx = if fresh {
                k.count.adjust(amount);
                self.hand_over(
                    Rec::new(target, digest, Kind::Adjust, amount, id, w).durable(),
                    w,
                    true,
                )?
            } else {
                None
            };
            drop(s);
            self.await_ack(rx)?;
            fresh
        } else {
            drop(s);
            let events = self.events(&target.to_string())?;
            let hex = digest_hex(digest);
            let seen = events.iter().any(|x| {
                x.kind == Kind::Adjust
                    && x.key_digest == hex
                    && x.event_id.as_deref() == Some(event_id)
            });
            if !seen {
                let rx = self.hand_over(
                    Rec::new(target, digest, Kind::Adjust, amount, id, w).durable(),
                    w,
                    true,
                )?;
                self.await_ack(rx)?;
            }
            !seen
        };
        Ok((fresh, self.report(digest, target, w.unix)?))
    }

    /// A key's state in `period` (memory for the current one, the file for others) and
    /// its `ledger_sum` recomputed from the file, once the writer has written what was
    /// handed to it before.
    pub(crate) fn report(
        &self,
        digest: u128,
        period: PeriodId,
        unix: u64,
    ) -> Result<KeyReport, String> {
        let name = period.to_string();
        let hex = digest_hex(digest);
        // Roll over first (a report after a period ended reads the new period).
        drop(self.shard_at(digest, unix)?);
        let events = self.events(&name)?;
        let mut from_file = KeyState::default();
        for e in events.iter().filter(|e| e.key_digest == hex) {
            from_file.apply(e);
        }
        let s = self.shard(digest);
        let count = if s.id.start == period.start {
            s.keys.get(&digest).map(|k| k.count).unwrap_or_default()
        } else {
            from_file.count
        };
        Ok(KeyReport {
            period: name,
            count,
            ledger_sum: from_file.count.used,
        })
    }

    /// The events of period `name`, read from its file once the writer has written what
    /// was handed to it before (none when there is no file).
    pub(crate) fn events(&self, name: &str) -> Result<Vec<Event>, String> {
        self.barrier(false)?;
        let path = Self::path_of(&self.dir, name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
        };
        // A record being appended right now may be cut short: `scan` drops it.
        scan(&bytes)
            .map(|s| s.events)
            .map_err(|c| format!("{}: corrupt record at byte {}", path.display(), c.offset))
    }

    /// Global scope, store down, `on_store_error = "allow"`: records a request admitted as
    /// bypassed — a `bypass` event handed to the writer (with `sync = "always"` on disk
    /// before this returns), queued for write-back. `Ok(false)`: its event id was recorded
    /// already this period (nothing).
    pub(crate) fn record_bypass(
        &self,
        digest: u128,
        cost: u64,
        event_id: &str,
        w: Writer<'_>,
    ) -> Result<bool, String> {
        let always = self.sync == SyncPolicy::Always;
        let mut s = self.shard_at(digest, w.unix)?;
        let id = s.id;
        let k = s.keys.entry(digest).or_default();
        if !k.ids.insert(id_hash(Kind::Bypass, event_id)) {
            return Ok(false);
        }
        k.count.used = k.count.used.saturating_add(cost);
        let r = Rec::new(
            id,
            digest,
            Kind::Bypass,
            cost as i64,
            Some(event_id.into()),
            w,
        );
        let rx = self.hand_over(r, w, always)?;
        drop(s);
        let e = Event {
            ts: crate::accesslog::rfc3339(w.unix, 0),
            period: id.to_string(),
            route: self.route.clone(),
            key_digest: digest_hex(digest),
            event_id: Some(event_id.to_string()),
            kind: Kind::Bypass,
            amount: cost as i64,
            revision: w.revision,
            instance: w.instance.to_string(),
        };
        {
            let mut p = lock(&self.pending);
            p.push(e);
            self.pending_len.store(p.len(), Ordering::Release);
        }
        self.await_ack(rx).map(|()| true)
    }

    /// The write-back turn, unless another request has it.
    pub(crate) fn write_back_turn(&self) -> Option<WriteBackTurn<'_>> {
        self.writing_back
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| WriteBackTurn(&self.writing_back))
    }

    /// Whether bypass events wait for write-back (no lock: asked on every request).
    pub(crate) fn has_pending(&self) -> bool {
        self.pending_len.load(Ordering::Acquire) > 0
    }

    /// The oldest bypass event waiting for write-back (it stays queued until
    /// [`RouteLedger::written_back`]).
    pub(crate) fn next_pending(&self) -> Option<Event> {
        lock(&self.pending).first().cloned()
    }

    /// The store took (or already had) the oldest pending event `e`.
    pub(crate) fn written_back(&self, e: &Event) {
        let mut p = lock(&self.pending);
        if p.first() == Some(e) {
            p.remove(0);
            self.pending_len.store(p.len(), Ordering::Release);
        }
    }

    /// Records on disk: written and covered by a finished `fdatasync`.
    #[cfg(test)]
    pub(crate) fn durable_records(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }
}

impl Drop for RouteLedger {
    /// Writes and syncs what is queued and waits for the writer to end (a reload that
    /// replaces the ledger, shutdown, tests that reopen the directory).
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
    }
}
