//! The local quota ledger: one append-only file per route and period
//! (`DIR/<route>/<period>.ledger`), one checksummed JSON event per line, group commit,
//! recovery on open, and the in-memory state of the current period's keys.
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
//! to archive. The log is one `write(2)` per event on a file opened for append, plus
//! `fdatasync` — on every consumption (`sync = "always"`, with concurrent writers sharing
//! one flush: group commit) or from a background flusher (`sync = "1s"`).
//!
//! # Recovery
//! [`scan`] reads a file: a last record that is cut short or fails its checksum (a write
//! torn by a crash) is dropped — the file is truncated to the last good record and a notice
//! says so; a bad record followed by good ones is corruption, and opening refuses with the
//! file and byte offset. Memory holds only the current period's keys (used, pending,
//! adjusted, and the hashes of their event ids); closed periods are their files.

use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher13;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::hash::Hasher;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
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

/// An open period file with its group-commit counters.
struct PeriodFile {
    path: PathBuf,
    file: File,
    /// Records appended (sequence numbers).
    written: AtomicU64,
    /// Records known to be on disk.
    synced: Mutex<u64>,
}

impl PeriodFile {
    /// Opens (creating) and recovers `path`: its events, and a notice when a torn last
    /// record was dropped.
    fn open(path: PathBuf) -> Result<(PeriodFile, Vec<Event>, Option<String>), String> {
        let shown = path.display().to_string();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
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
        let n = s.events.len() as u64;
        Ok((
            PeriodFile {
                path,
                file,
                written: AtomicU64::new(n),
                synced: Mutex::new(n),
            },
            s.events,
            notice,
        ))
    }

    /// Appends one record (one `write(2)`; the file is in append mode). Called with the
    /// book's lock held, so records are whole and in order. Returns its sequence number.
    fn append(&self, e: &Event) -> std::io::Result<u64> {
        (&self.file).write_all(&frame(e))?;
        Ok(self.written.fetch_add(1, Ordering::AcqRel) + 1)
    }

    /// Makes sure record `seq` is on disk; concurrent callers share one `fdatasync`.
    fn sync_to(&self, seq: u64) -> std::io::Result<()> {
        let mut synced = lock(&self.synced);
        if *synced >= seq {
            return Ok(());
        }
        let target = self.written.load(Ordering::Acquire);
        self.file.sync_data()?;
        *synced = target;
        Ok(())
    }

    fn sync_all_written(&self) -> std::io::Result<()> {
        self.sync_to(self.written.load(Ordering::Acquire))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The current period of one route: its file and its keys.
struct Book {
    id: PeriodId,
    file: Arc<PeriodFile>,
    keys: HashMap<u128, KeyState>,
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
    book: Mutex<Book>,
    /// Global scope: `bypass` events not yet written to the store (oldest first). Filled
    /// by [`RouteLedger::record_bypass`] and, on open, from the current period's file
    /// (writing one back again is harmless: the store dedupes by event id).
    pending: Mutex<Vec<Event>>,
    /// One request at a time writes pending events back.
    writing_back: std::sync::atomic::AtomicBool,
}

/// The write-back turn; ends when dropped.
pub(crate) struct WriteBackTurn<'a>(&'a std::sync::atomic::AtomicBool);

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

impl RouteLedger {
    /// Opens (creating) `dir/<route>/` and recovers the current period's file. Returns the
    /// ledger and the notices recovery has for the operator.
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
        let mut notices = Vec::new();
        let book = Self::load_book(&dir, period.at(unix), &mut notices)?;
        let l = Arc::new(RouteLedger {
            route: route.to_string(),
            dir,
            period,
            sync,
            book: Mutex::new(book),
            pending: Mutex::new(Vec::new()),
            writing_back: std::sync::atomic::AtomicBool::new(false),
        });
        let current = period.at(unix).to_string();
        *lock(&l.pending) = l
            .events(&current)?
            .into_iter()
            .filter(|e| e.kind == Kind::Bypass)
            .collect();
        if let SyncPolicy::Every(d) = sync {
            spawn_flusher(Arc::downgrade(&l), d);
        }
        Ok((l, notices))
    }

    /// Whether this ledger serves a quota in `dir` cut by `period` with `sync`.
    pub(crate) fn serves(&self, dir: &Path, route: &str, period: Period, sync: SyncPolicy) -> bool {
        self.dir == dir.join(file_name(route)) && self.period == period && self.sync == sync
    }

    fn path_of(dir: &Path, name: &str) -> PathBuf {
        dir.join(format!("{name}.ledger"))
    }

    fn load_book(dir: &Path, id: PeriodId, notices: &mut Vec<String>) -> Result<Book, String> {
        let (file, events, notice) = PeriodFile::open(Self::path_of(dir, &id.to_string()))?;
        notices.extend(notice);
        let mut keys: HashMap<u128, KeyState> = HashMap::new();
        for e in &events {
            let Ok(d) = u128::from_str_radix(&e.key_digest, 16) else {
                continue;
            };
            keys.entry(d).or_default().apply(e);
        }
        Ok(Book {
            id,
            file: Arc::new(file),
            keys,
        })
    }

    /// The book of the period containing `unix`, rolling over when a period ended (the
    /// old file is flushed and closed; its keys leave memory).
    fn book_at(&self, unix: u64) -> Result<MutexGuard<'_, Book>, String> {
        let mut b = lock(&self.book);
        if unix >= b.id.end || unix < b.id.start {
            let id = self.period.at(unix);
            if id.start > b.id.start {
                let _ = b.file.sync_all_written();
                let mut notices = Vec::new();
                *b = Self::load_book(&self.dir, id, &mut notices)?;
            }
        }
        Ok(b)
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
        let mut b = self.book_at(unix)?;
        let id = b.id;
        let k = b.keys.entry(digest).or_default();
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
        let mut b = lock(&self.book);
        if b.id.start == t.period_start
            && let Some(k) = b.keys.get_mut(&t.digest)
        {
            k.count.release(t.cost);
        }
    }

    /// Turns a reservation into a `consume` event: written (and with `sync = "always"`
    /// on disk) before this returns. `Ok(false)`: the event id was consumed meanwhile
    /// (a duplicate: nothing written).
    pub(crate) fn commit(&self, t: &Ticket, w: Writer<'_>) -> Result<bool, String> {
        let mut b = lock(&self.book);
        let current = b.id.start == t.period_start;
        let period = self.period.at(t.period_start);
        let e = Event {
            ts: crate::accesslog::rfc3339(w.unix, 0),
            period: period.to_string(),
            route: self.route.clone(),
            key_digest: digest_hex(t.digest),
            event_id: t.event_id.clone(),
            kind: Kind::Consume,
            amount: t.cost as i64,
            revision: w.revision,
            instance: w.instance.to_string(),
        };
        if !current {
            // The period closed while the request was in flight: the unit belongs to the
            // period that admitted it, whose file is written directly.
            drop(b);
            return self.append_elsewhere(&e).map(|()| true);
        }
        let k = b.keys.entry(t.digest).or_default();
        if let Some(id) = &t.event_id
            && !k.ids.insert(id_hash(Kind::Consume, id))
        {
            k.count.release(t.cost);
            return Ok(false);
        }
        k.count.commit(t.cost);
        let file = b.file.clone();
        let seq = file
            .append(&e)
            .map_err(|err| format!("{}: cannot append: {err}", file.path.display()))?;
        drop(b);
        if self.sync == SyncPolicy::Always {
            file.sync_to(seq)
                .map_err(|err| format!("{}: cannot sync: {err}", file.path.display()))?;
        }
        Ok(true)
    }

    /// Appends to a period file that is not the current book (and syncs it).
    fn append_elsewhere(&self, e: &Event) -> Result<(), String> {
        let (f, _, _) = PeriodFile::open(Self::path_of(&self.dir, &e.period))?;
        f.append(e)
            .and_then(|_| f.sync_all_written())
            .map_err(|err| format!("{}: cannot append: {err}", f.path.display()))
    }

    /// An `adjust` event for key `digest` in period `period` (`None`: the current one),
    /// idempotent by `event_id`; returns whether it was new, and the key's report.
    pub(crate) fn adjust(
        &self,
        digest: u128,
        amount: i64,
        event_id: &str,
        period: Option<PeriodId>,
        w: Writer<'_>,
    ) -> Result<(bool, KeyReport), String> {
        let mut b = self.book_at(w.unix)?;
        let target = period.unwrap_or(b.id);
        let e = Event {
            ts: crate::accesslog::rfc3339(w.unix, 0),
            period: target.to_string(),
            route: self.route.clone(),
            key_digest: digest_hex(digest),
            event_id: Some(event_id.to_string()),
            kind: Kind::Adjust,
            amount,
            revision: w.revision,
            instance: w.instance.to_string(),
        };
        let h = id_hash(Kind::Adjust, event_id);
        let fresh = if target.start == b.id.start {
            let k = b.keys.entry(digest).or_default();
            let fresh = k.ids.insert(h);
            if fresh {
                k.count.adjust(amount);
                let file = b.file.clone();
                let seq = file
                    .append(&e)
                    .map_err(|err| format!("{}: cannot append: {err}", file.path.display()))?;
                file.sync_to(seq)
                    .map_err(|err| format!("{}: cannot sync: {err}", file.path.display()))?;
            }
            drop(b);
            fresh
        } else {
            drop(b);
            let events = self.events(&e.period)?;
            let seen = events.iter().any(|x| {
                x.kind == Kind::Adjust
                    && x.key_digest == e.key_digest
                    && x.event_id.as_deref() == Some(event_id)
            });
            if !seen {
                self.append_elsewhere(&e)?;
            }
            !seen
        };
        Ok((fresh, self.report(digest, target, w.unix)?))
    }

    /// A key's state in `period` (memory for the current one, the file for others) and
    /// its `ledger_sum` recomputed from the file.
    pub(crate) fn report(
        &self,
        digest: u128,
        period: PeriodId,
        unix: u64,
    ) -> Result<KeyReport, String> {
        let name = period.to_string();
        let hex = digest_hex(digest);
        // Roll over first (a report after a period ended reads the new book); the file
        // is read back as written (appends are visible before they are synced).
        drop(self.book_at(unix)?);
        let events = self.events(&name)?;
        let mut from_file = KeyState::default();
        for e in events.iter().filter(|e| e.key_digest == hex) {
            from_file.apply(e);
        }
        let b = lock(&self.book);
        let count = if b.id.start == period.start {
            b.keys.get(&digest).map(|k| k.count).unwrap_or_default()
        } else {
            from_file.count
        };
        Ok(KeyReport {
            period: name,
            count,
            ledger_sum: from_file.count.used,
        })
    }

    /// The events of period `name`, read from its file (none when there is no file).
    pub(crate) fn events(&self, name: &str) -> Result<Vec<Event>, String> {
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
    /// bypassed — a `bypass` event in this (local) ledger, on disk per `sync`, queued for
    /// write-back. `Ok(false)`: its event id was recorded already this period (nothing).
    pub(crate) fn record_bypass(
        &self,
        digest: u128,
        cost: u64,
        event_id: &str,
        w: Writer<'_>,
    ) -> Result<bool, String> {
        let mut b = self.book_at(w.unix)?;
        let e = Event {
            ts: crate::accesslog::rfc3339(w.unix, 0),
            period: b.id.to_string(),
            route: self.route.clone(),
            key_digest: digest_hex(digest),
            event_id: Some(event_id.to_string()),
            kind: Kind::Bypass,
            amount: cost as i64,
            revision: w.revision,
            instance: w.instance.to_string(),
        };
        let k = b.keys.entry(digest).or_default();
        if !k.ids.insert(id_hash(Kind::Bypass, event_id)) {
            return Ok(false);
        }
        k.count.used = k.count.used.saturating_add(cost);
        let file = b.file.clone();
        let seq = file
            .append(&e)
            .map_err(|err| format!("{}: cannot append: {err}", file.path.display()))?;
        drop(b);
        lock(&self.pending).push(e);
        if self.sync == SyncPolicy::Always {
            file.sync_to(seq)
                .map_err(|err| format!("{}: cannot sync: {err}", file.path.display()))?;
        }
        Ok(true)
    }

    /// The write-back turn, unless another request has it.
    pub(crate) fn write_back_turn(&self) -> Option<WriteBackTurn<'_>> {
        self.writing_back
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| WriteBackTurn(&self.writing_back))
    }

    /// Whether bypass events wait for write-back.
    pub(crate) fn has_pending(&self) -> bool {
        !lock(&self.pending).is_empty()
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
        }
    }

    /// Flushes what was written (shutdown, tests).
    pub(crate) fn flush(&self) {
        let f = lock(&self.book).file.clone();
        let _ = f.sync_all_written();
    }
}

/// The group-commit flusher of a `sync = "<interval>"` ledger: every interval, one
/// `fdatasync` of what was appended; ends within a second of the ledger being dropped
/// (it wakes at least once a second to look).
fn spawn_flusher(l: Weak<RouteLedger>, every: Duration) {
    let _ = std::thread::Builder::new()
        .name("weir-quota-sync".into())
        .spawn(move || {
            let step = every.min(Duration::from_secs(1));
            let mut waited = Duration::ZERO;
            loop {
                std::thread::sleep(step);
                waited += step;
                let Some(l) = l.upgrade() else { return };
                if waited >= every {
                    waited = Duration::ZERO;
                    l.flush();
                }
            }
        });
}
