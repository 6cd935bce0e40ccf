//! The ledger against a reference model: any interleaving of consume, duplicate,
//! rejected (released) reservations, adjustments, period changes, restarts and crashes
//! that tear the last record at any byte keeps `used == ledger_sum`, never counts an event
//! id twice, and loses nothing but a torn last record.

use super::layer::SyncPolicy;
use super::ledger::{Reserved, RouteLedger, Writer, scan};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use weir_core::Period;

const LIMIT: u64 = 5;
const PERIOD: Period = Period::Every(10);

fn tmp_dir(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "weir-quota-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn w(unix: u64) -> Writer<'static> {
    Writer {
        revision: 1,
        instance: "gw-test",
        unix,
    }
}

/// The model's ledgers: the sync setting changes when records reach the disk, not what
/// they say (crashes are simulated by cutting the file), so no fsync slows the cases.
fn open(dir: &std::path::Path, unix: u64) -> (Arc<RouteLedger>, Vec<String>) {
    let sync = SyncPolicy::Every(Duration::from_secs(3600));
    RouteLedger::open(dir, "r/1", PERIOD, sync, unix).expect("opens")
}

/// The ledger file of the period containing `unix`.
fn file_of(dir: &std::path::Path, unix: u64) -> PathBuf {
    dir.join("r%2F1")
        .join(format!("{}.ledger", PERIOD.at(unix)))
}

#[test]
fn torn_tail_is_dropped_and_corruption_elsewhere_names_the_offset() {
    let dir = tmp_dir("scan");
    let (l, n) = RouteLedger::open(&dir, "r/1", PERIOD, SyncPolicy::Always, 100).unwrap();
    assert!(n.is_empty());
    for i in 0..3 {
        let (r, _) = l.reserve(7, LIMIT, 1, Some(&format!("e{i}")), 100).unwrap();
        let Reserved::Taken(t, _) = r else {
            panic!("{r:?}")
        };
        assert!(l.commit(&t, w(100)).unwrap());
    }
    drop(l);
    let path = file_of(&dir, 100);
    let bytes = std::fs::read(&path).unwrap();
    let lines: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 3);
    // Cut inside the last record: recovery drops it with a notice and keeps two.
    std::fs::write(&path, &bytes[..lines[2] - 5]).unwrap();
    let (l, n) = open(&dir, 100);
    assert_eq!(n.len(), 1, "{n:?}");
    assert!(n[0].contains(&format!("at byte {}", lines[1])), "{}", n[0]);
    assert_eq!(l.report(7, PERIOD.at(100), 100).unwrap().count.used, 2);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), lines[1] as u64);
    drop(l);
    // A flipped byte in the first record, good records after it: refuses, names the offset.
    let mut bad = std::fs::read(&path).unwrap();
    bad[20] ^= 0x01;
    std::fs::write(&path, &bad).unwrap();
    let e = RouteLedger::open(&dir, "r/1", PERIOD, SyncPolicy::Always, 100)
        .err()
        .expect("corrupt");
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains("at byte 0"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scan_never_panics_on_short_garbage() {
    for b in [
        &b""[..],
        b"\n",
        b"00000000 {}\n",
        b"zzzzzzzz x",
        b"\xff\xfe\n\n",
    ] {
        let _ = scan(b);
    }
    assert_eq!(scan(b"garbage").unwrap().torn, Some(7));
    assert!(scan(b"garbage\n00000000 {}\n").is_ok()); // both bad: a torn tail of two lines
}

#[test]
fn group_commit_flusher_and_reload_reuse() {
    let dir = tmp_dir("flush");
    let sync = SyncPolicy::Every(Duration::from_millis(20));
    let (l, _) = RouteLedger::open(&dir, "r", PERIOD, sync, 5).unwrap();
    assert!(l.serves(&dir, "r", PERIOD, sync));
    assert!(!l.serves(&dir, "r", Period::Day, sync));
    assert!(!l.serves(&dir, "r", PERIOD, SyncPolicy::Always));
    let (r, _) = l.reserve(1, LIMIT, 2, None, 5).unwrap();
    let Reserved::Taken(t, 3) = r else {
        panic!("{r:?}")
    };
    assert!(l.commit(&t, w(5)).unwrap());
    std::thread::sleep(Duration::from_millis(60));
    let events = l.events(&PERIOD.at(5).to_string()).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].amount, 2);
    assert_eq!(events[0].key_digest.len(), 32);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The writer thread: records committed from many threads at once all land, each
/// thread's records of a key in the order it committed them, with `used == ledger_sum`;
/// with `sync = "always"` a commit returns only once its record is covered by a finished
/// `fdatasync` (every commit that returned is counted as durable).
#[test]
fn writer_lands_every_record_in_per_key_order_and_acks_always_after_fsync() {
    const THREADS: usize = 6;
    const PER_THREAD: usize = 150;
    const KEYS: usize = 3;
    for sync in [
        SyncPolicy::Always,
        SyncPolicy::Every(Duration::from_secs(3600)),
    ] {
        let dir = tmp_dir("writer");
        let (l, _) = RouteLedger::open(&dir, "r", PERIOD, sync, 100).unwrap();
        let returned = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (l, returned) = (&l, &returned);
                s.spawn(move || {
                    for i in 0..PER_THREAD {
                        let id = format!("t{t}-{i}");
                        let key = digest((i % KEYS) as u8);
                        let (r, _) = l.reserve(key, 1 << 40, 1, Some(&id), 100).unwrap();
                        let Reserved::Taken(ticket, _) = r else {
                            panic!("{r:?}")
                        };
                        assert!(l.commit(&ticket, w(100)).unwrap());
                        if sync == SyncPolicy::Always {
                            let n = returned.fetch_add(1, Ordering::SeqCst) + 1;
                            let durable = l.durable_records();
                            assert!(durable >= n, "{n} commits returned, {durable} durable");
                        }
                    }
                });
            }
        });
        let events = l.events(&PERIOD.at(100).to_string()).unwrap();
        assert_eq!(events.len(), THREADS * PER_THREAD, "{sync:?}");
        // Per thread and key, the sequence numbers rise in file order.
        let mut last: HashMap<(String, String), usize> = HashMap::new();
        for e in &events {
            let id = e.event_id.as_deref().unwrap();
            let (t, i) = id[1..].split_once('-').unwrap();
            let i: usize = i.parse().unwrap();
            let prev = last.insert((t.to_string(), e.key_digest.clone()), i);
            assert!(prev.is_none_or(|p| p < i), "{sync:?}: {id} after {prev:?}");
        }
        for key in 0..KEYS {
            let r = l.report(digest(key as u8), PERIOD.at(100), 100).unwrap();
            assert_eq!(r.count.used, (THREADS * PER_THREAD / KEYS) as u64);
            assert_eq!(r.ledger_sum, r.count.used);
        }
        drop(l);
        // What the dropped ledger wrote is whole after a restart.
        let (l, notices) = RouteLedger::open(&dir, "r", PERIOD, sync, 100).unwrap();
        assert!(notices.is_empty(), "{notices:?}");
        let r = l.report(digest(0), PERIOD.at(100), 100).unwrap();
        assert_eq!(r.count.used, (THREADS * PER_THREAD / KEYS) as u64);
        drop(l);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    /// The writer's line maker writes exactly what `frame` (serde_json) writes, for any
    /// route, instance and event id text (quotes, backslashes, control and non-ASCII
    /// characters) and any numbers.
    #[test]
    fn the_writers_lines_are_frames(
        route in "\\PC{0,12}|[\"\\\\\u{0}-\u{1f}a/.]{0,6}",
        instance in "\\PC{0,8}",
        event_id in proptest::option::of("[!-~]{0,10}|\\PC{0,4}"),
        digest in any::<u128>(),
        kind in 0u8..3,
        amount in any::<i64>(),
        revision in any::<u64>(),
        unix in 0u64..8_000_000_000,
    ) {
        let e = super::ledger::Event {
            ts: crate::accesslog::rfc3339(unix, 0),
            period: PERIOD.at(unix).to_string(),
            route,
            key_digest: super::ledger::digest_hex(digest),
            event_id,
            kind: [super::ledger::Kind::Consume, super::ledger::Kind::Adjust, super::ledger::Kind::Bypass][usize::from(kind)],
            amount,
            revision,
            instance,
        };
        let fast = super::ledger::line_of(&e, digest);
        let slow = super::ledger::frame(&e);
        prop_assert_eq!(String::from_utf8_lossy(&fast), String::from_utf8_lossy(&slow));
    }
}

/// One step of a history.
#[derive(Debug, Clone)]
enum Op {
    /// A request for `key` of `cost` with an optional event id, admitted by every later
    /// gate (`true`) or rejected by one (`false`).
    Request {
        key: u8,
        cost: u64,
        id: Option<u8>,
        later_ok: bool,
    },
    /// An adjustment of `key` by `amount` with event id `id`.
    Adjust { key: u8, amount: i64, id: u8 },
    /// Time moves on by this many seconds (perhaps into the next period).
    Advance(u64),
    /// Clean restart.
    Restart,
    /// `kill -9` while the last record was being written: it is cut at this fraction.
    Crash(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3, 0u64..3, proptest::option::of(0u8..6), proptest::bool::weighted(0.8))
            .prop_map(|(key, cost, id, later_ok)| Op::Request { key, cost, id, later_ok }),
        1 => (0u8..3, -3i64..4, 0u8..3).prop_map(|(key, amount, id)| Op::Adjust { key, amount, id }),
        1 => (0u64..8).prop_map(Op::Advance),
        1 => Just(Op::Restart),
        1 => (0u8..255).prop_map(Op::Crash),
    ]
}

/// A key's reference state in one period: used, adjusted, consume ids, adjust ids.
type RefKey = (u64, i64, HashSet<u8>, HashSet<u8>);

/// The reference: per period, the committed events in order.
#[derive(Default, Clone, Debug)]
struct Model {
    /// (period start, key) → its state.
    keys: HashMap<(u64, u8), RefKey>,
    /// The last record written: (period start, key, undo).
    last: Option<(u64, u8, Undo)>,
}

#[derive(Debug, Clone)]
enum Undo {
    Consume(u64, Option<u8>),
    Adjust(i64, u8),
}

fn digest(key: u8) -> u128 {
    0x1000 + u128::from(key)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn ledger_matches_the_reference_model(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tmp_dir("model");
        let mut unix = 100u64;
        let (mut l, _) = open(&dir, unix);
        let mut m = Model::default();
        for op in ops {
            let p = PERIOD.at(unix).start;
            match op {
                Op::Request { key, cost, id, later_ok } => {
                    let ids = id.map(|i| format!("ev-{i}"));
                    let e = m.keys.entry((p, key)).or_default();
                    let (r, _) = l.reserve(digest(key), LIMIT, cost, ids.as_deref(), unix).unwrap();
                    let dup = id.is_some_and(|i| e.2.contains(&i));
                    let fits = (e.0 + cost) as i128 <= LIMIT as i128 + e.1 as i128;
                    match r {
                        Reserved::Duplicate(_) => prop_assert!(dup),
                        Reserved::Exhausted(_) => prop_assert!(!dup && !fits),
                        Reserved::Taken(t, _) => {
                            prop_assert!(!dup && fits);
                            if later_ok {
                                prop_assert!(l.commit(&t, w(unix)).unwrap());
                                e.0 += cost;
                                if let Some(i) = id { e.2.insert(i); }
                                m.last = Some((p, key, Undo::Consume(cost, id)));
                            } else {
                                l.release(&t);
                            }
                        }
                    }
                }
                Op::Adjust { key, amount, id } => {
                    let e = m.keys.entry((p, key)).or_default();
                    let (fresh, _) = l
                        .adjust(digest(key), amount, &format!("adj-{id}"), None, w(unix))
                        .unwrap();
                    prop_assert_eq!(fresh, e.3.insert(id));
                    if fresh {
                        e.1 += amount;
                        m.last = Some((p, key, Undo::Adjust(amount, id)));
                    }
                }
                Op::Advance(s) => {
                    unix += s;
                    if PERIOD.at(unix).start != p {
                        m.last = None;
                    }
                }
                Op::Restart => {
                    drop(l);
                    l = open(&dir, unix).0;
                }
                Op::Crash(frac) => {
                    drop(l);
                    if let Some((lp, key, undo)) = m.last.take() {
                        let path = file_of(&dir, lp);
                        let bytes = std::fs::read(&path).unwrap();
                        let start = bytes[..bytes.len() - 1]
                            .iter()
                            .rposition(|b| *b == b'\n')
                            .map_or(0, |i| i + 1);
                        let rec = bytes.len() - start;
                        let cut = start + rec * usize::from(frac) / 256;
                        std::fs::write(&path, &bytes[..cut]).unwrap();
                        let e = m.keys.get_mut(&(lp, key)).unwrap();
                        match undo {
                            Undo::Consume(c, id) => {
                                e.0 -= c;
                                if let Some(i) = id { e.2.remove(&i); }
                            }
                            Undo::Adjust(a, id) => {
                                e.1 -= a;
                                e.3.remove(&id);
                            }
                        }
                    }
                    l = open(&dir, unix).0;
                }
            }
            // Every key of the current period: memory == model == file.
            let now = PERIOD.at(unix);
            for key in 0..3u8 {
                let r = l.report(digest(key), now, unix).unwrap();
                let want = m.keys.get(&(now.start, key)).cloned().unwrap_or_default();
                prop_assert_eq!(r.count.used, want.0);
                prop_assert_eq!(r.count.adjusted, want.1);
                prop_assert_eq!(r.count.pending, 0);
                prop_assert_eq!(r.ledger_sum, r.count.used);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn the_fuzz_corpus_seeds_recover() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/corpus/quota_ledger"
    );
    let valid = std::fs::read(format!("{dir}/seed-valid")).unwrap();
    let s = scan(&valid).unwrap();
    assert_eq!((s.events.len(), s.torn), (3, None));
    let torn = std::fs::read(format!("{dir}/seed-torn")).unwrap();
    let s = scan(&torn).unwrap();
    assert_eq!(s.events.len(), 2);
    assert!(s.torn.is_some());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    /// The fuzz target's checks on random bytes (the fuzzer explores further).
    #[test]
    fn the_fuzz_entry_holds(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        crate::fuzz_ledger(&data);
    }
}

/// The bypass write-back against a model store that may fail a call before applying it
/// or after (the answer is lost), with restarts that re-read the local journal in
/// between: the store counts each recorded bypass event exactly once — never twice, and
/// every one once a write-back finally goes through.
mod write_back {
    use super::*;
    use crate::quota::layer::{Cost, QuotaPolicy};
    use crate::quota::service::write_back;
    use crate::ratelimit::{OnStoreError, Scope};
    use crate::store::{GlobalStore, QuotaOp, QuotaReply, QuotaRequest, QuotaStatus, StoreError};
    use core::future::Future;
    use core::pin::Pin;
    use std::sync::Mutex;

    /// What the next store calls do: `0` apply and answer, `1` fail before applying,
    /// `2` apply and lose the answer.
    #[derive(Default)]
    struct ModelStore {
        ids: Mutex<HashSet<(String, String, String)>>,
        used: Mutex<u64>,
        plan: Mutex<Vec<u8>>,
    }

    impl GlobalStore for ModelStore {
        fn acquire(
            &self,
            _: crate::store::StoreRequest,
        ) -> Pin<Box<dyn Future<Output = Result<weir_core::Decision, StoreError>> + Send>> {
            Box::pin(core::future::ready(Err(StoreError::new(
                crate::store::StoreErrorKind::Unavailable,
                "unused",
            ))))
        }
        fn quota(
            &self,
            req: QuotaRequest,
        ) -> Pin<Box<dyn Future<Output = Result<QuotaReply, StoreError>> + Send>> {
            let step = self.plan.lock().unwrap().pop().unwrap_or(0);
            let QuotaOp::Bypass { cost, event_id, .. } = req.op else {
                panic!("only bypass write-backs here")
            };
            let out = if step == 1 {
                Err(StoreError::new(
                    crate::store::StoreErrorKind::Unavailable,
                    "down",
                ))
            } else {
                let fresh = self.ids.lock().unwrap().insert((
                    req.keys.prefix.clone(),
                    req.keys.digest.clone(),
                    event_id,
                ));
                if fresh {
                    *self.used.lock().unwrap() += cost;
                }
                if step == 2 {
                    Err(StoreError::new(
                        crate::store::StoreErrorKind::Unavailable,
                        "answer lost",
                    ))
                } else {
                    Ok(QuotaReply {
                        status: if fresh {
                            QuotaStatus::Done
                        } else {
                            QuotaStatus::Duplicate
                        },
                        used: 0,
                        adjusted: 0,
                        ledger_sum: 0,
                        entry: String::new(),
                        events: Vec::new(),
                    })
                }
            };
            Box::pin(core::future::ready(out))
        }
    }

    struct Never;
    impl crate::timer::Timer for Never {
        fn sleep(&self, _: Duration) -> impl Future<Output = ()> {
            core::future::pending()
        }
    }

    fn policy() -> QuotaPolicy {
        QuotaPolicy {
            limit: LIMIT,
            period: PERIOD,
            key: Vec::new(),
            cost: Cost::Fixed(1),
            event_id: None,
            scope: Scope::Global,
            on_store_error: OnStoreError::Allow,
            headers: true,
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A bypassed request of key `k` with event id `e` (a small pool: repeats happen).
        Bypass(u8, u8),
        /// A write-back attempt with this failure plan (last first).
        WriteBack(Vec<u8>),
        /// The gateway restarts (the journal is read again; everything is re-queued).
        Restart,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..3, 0u8..6).prop_map(|(k, e)| Op::Bypass(k, e)),
            3 => proptest::collection::vec(0u8..3, 0..4).prop_map(Op::WriteBack),
            1 => Just(Op::Restart),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn each_bypass_event_counts_once(ops in proptest::collection::vec(op(), 1..40)) {
            let dir = tmp_dir("writeback");
            let q = policy();
            let model = Arc::new(ModelStore::default());
            let store: Arc<dyn GlobalStore> = model.clone();
            let used = || *model.used.lock().unwrap();
            let (mut l, _) = open(&dir, 100);
            let mut recorded: HashSet<(u8, u8)> = HashSet::new();
            for o in ops {
                match o {
                    Op::Bypass(k, e) => {
                        let fresh = l
                            .record_bypass(u128::from(k), 1, &format!("ev-{e}"), w(100))
                            .unwrap();
                        prop_assert_eq!(fresh, recorded.insert((k, e)));
                    }
                    Op::WriteBack(plan) => {
                        *model.plan.lock().unwrap() = plan;
                        crate::__block_on(write_back(&q, &l, &store, Duration::from_secs(1), &Never, 100, usize::MAX));
                    }
                    Op::Restart => {
                        drop(l);
                        l = open(&dir, 100).0;
                    }
                }
                prop_assert!(used() <= recorded.len() as u64, "never more than recorded");
            }
            model.plan.lock().unwrap().clear();
            crate::__block_on(write_back(&q, &l, &store, Duration::from_secs(1), &Never, 100, usize::MAX));
            prop_assert_eq!(used(), recorded.len() as u64, "every bypass event once");
            prop_assert!(!l.has_pending());
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
