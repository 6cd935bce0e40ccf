//! The quota step of a request: the route's ledger (kept across reloads while its
//! directory, period and sync are unchanged), the gate that reserves a request's cost, and
//! the settlement that commits it once every later gate admitted (or gives it back).
//!
//! Reserving at the gate and committing later is what makes "a request any gate rejects
//! consumes nothing" hold without a leak: a reservation counts against the limit while the
//! request is being admitted (two concurrent requests cannot both take the last unit), and
//! is either one `consume` event or nothing.

use super::layer::{Cost, QuotaPolicy, QuotaSettings};
use super::ledger::{Event, Kind, Reserved, RouteLedger, Ticket, Writer, digest_hex};
use crate::descriptor::Headers;
use crate::metrics::RouteMetrics;
use crate::policy::PolicySet;
use crate::store::OnStoreError;
use crate::store::{
    GlobalStore, QuotaKeys, QuotaOp, QuotaReply, QuotaRequest, QuotaStatus, StoreError,
    StoreErrorKind,
};
use crate::text::HeaderText;
use crate::timer::{Either, Timer, select};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use weir_core::{PeriodId, QuotaCount};

/// Longest event id accepted (bytes); a longer one is 400 `bad_request`.
pub(crate) const MAX_EVENT_ID_BYTES: usize = 256;

/// The open ledgers of a config, by route id.
pub(crate) type Ledgers = HashMap<String, Arc<RouteLedger>>;

/// Opens the ledger of every route with a quota, reusing `old`'s for routes whose
/// directory, period and sync are unchanged (a reload keeps their state without reading
/// the files again). Returns the ledgers and recovery's notices; an error (a corrupt
/// ledger, a directory that cannot be made) names the file.
pub(crate) fn open_ledgers(
    set: &PolicySet,
    old: Option<&Ledgers>,
    unix: u64,
) -> Result<(Ledgers, Vec<String>), String> {
    let QuotaSettings { dir, sync } = &set.quota;
    let mut out = Ledgers::new();
    let mut notices = Vec::new();
    for r in &set.routes {
        let Some(q) = &r.quota else { continue };
        let kept = old
            .and_then(|o| o.get(&r.id))
            .filter(|l| l.serves(dir, &r.id, q.period, *sync))
            .cloned();
        let l = match kept {
            Some(l) => l,
            None => {
                let (l, n) = RouteLedger::open(dir, &r.id, q.period, *sync, unix)?;
                notices.extend(n);
                l
            }
        };
        out.insert(r.id.clone(), l);
    }
    Ok((out, notices))
}

/// What the request brings to the gate, read in `Engine::begin`.
pub(crate) struct Ask {
    /// The key's digest.
    pub digest: u128,
    /// Units this request costs.
    pub cost: u64,
    /// Its event id, if the route names one and the request has it.
    pub event_id: Option<String>,
}

/// Why a request cannot be asked about (→ 400 `bad_request`).
pub(crate) struct BadAsk;

/// Reads the cost and event id of a request (`cost = "header:NAME"` must be a
/// non-negative integer; an event id at most [`MAX_EVENT_ID_BYTES`] of visible ASCII).
pub(crate) fn ask(q: &QuotaPolicy, digest: u128, headers: &dyn Headers) -> Result<Ask, BadAsk> {
    let cost = match &q.cost {
        Cost::Fixed(n) => *n,
        Cost::Header(h) => {
            let v = headers.get(h).ok_or(BadAsk)?;
            let v = core::str::from_utf8(v).map_err(|_| BadAsk)?.trim();
            if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(BadAsk);
            }
            v.parse::<u64>().map_err(|_| BadAsk)?
        }
    };
    let event_id = match q.event_id.as_deref().and_then(|h| headers.get(h)) {
        None | Some(b"") => None,
        Some(v) if v.len() <= MAX_EVENT_ID_BYTES && v.iter().all(|b| (0x21..=0x7e).contains(b)) => {
            Some(String::from_utf8_lossy(v).into_owned())
        }
        Some(_) => return Err(BadAsk),
    };
    Ok(Ask {
        digest,
        cost,
        event_id,
    })
}

/// A reservation a request holds until it is settled.
pub(crate) enum Held {
    /// Local scope: units reserved in the route's ledger.
    Local {
        ledger: Arc<RouteLedger>,
        ticket: Ticket,
        cost: u64,
    },
    /// Global scope: consumed in the store by the gate's one script call, provisionally
    /// (given back with one more call when the request is not admitted after all).
    Global {
        store: Arc<dyn GlobalStore>,
        release: QuotaRequest,
        cost: u64,
    },
    /// Global scope while the store failed (`on_store_error = "allow"`): recorded as a
    /// `bypass` event in the local ledger when it settles, written back on recovery.
    Bypass {
        ledger: Arc<RouteLedger>,
        digest: u128,
        cost: u64,
        event_id: String,
    },
}

/// The gate's answer for one request.
pub(crate) struct Gate {
    /// The reservation (none for a duplicate event id or a rejection).
    pub held: Option<Held>,
    /// `RateLimit-Policy` and `RateLimit` items (empty with `headers = false`).
    pub headers: Vec<(&'static str, HeaderText)>,
    /// Exhausted: `Retry-After` in seconds (to the next period).
    pub exhausted: Option<u64>,
}

/// The quota gate: duplicate (passes, consumes nothing), reserved, or exhausted.
pub(crate) fn gate(
    q: &QuotaPolicy,
    ledger: &Arc<RouteLedger>,
    route_id: &str,
    a: &Ask,
    unix: u64,
    metrics: &RouteMetrics,
) -> Result<Gate, String> {
    let (r, period) = ledger.reserve(a.digest, q.limit, a.cost, a.event_id.as_deref(), unix)?;
    let t = period.secs_to_end(unix);
    let (held, remaining, exhausted) = match r {
        Reserved::Taken(ticket, rem) => (
            Some(Held::Local {
                ledger: ledger.clone(),
                ticket,
                cost: a.cost,
            }),
            rem,
            None,
        ),
        Reserved::Duplicate(rem) => {
            metrics.quota_duplicates.inc();
            (None, rem, None)
        }
        Reserved::Exhausted(rem) => {
            metrics.quota_exhausted.inc();
            (None, rem, Some(t))
        }
    };
    let headers = quota_headers(q, ledger, route_id, period, remaining, t);
    Ok(Gate {
        held,
        headers,
        exhausted,
    })
}

/// The `"ROUTE.quota"` RateLimit items (none with `headers = false`); the policy item is
/// the ledger's, made once per period.
fn quota_headers(
    q: &QuotaPolicy,
    ledger: &RouteLedger,
    route_id: &str,
    period: PeriodId,
    remaining: u64,
    t: u64,
) -> Vec<(&'static str, HeaderText)> {
    if q.headers {
        let policy = ledger.policy_item(period, q.limit, || {
            HeaderText::from(format!(
                "\"{route_id}.quota\";q={};w={}",
                q.limit,
                period.len()
            ))
        });
        vec![
            ("ratelimit-policy", policy),
            (
                "ratelimit",
                HeaderText::from_parts(&[
                    "\"",
                    route_id,
                    ".quota\";r=",
                    itoa::Buffer::new().format(remaining),
                    ";t=",
                    itoa::Buffer::new().format(t),
                ]),
            ),
        ]
    } else {
        Vec::new()
    }
}

/// Idempotency markers of a global period live this long past its end: requests admitted
/// just before the end settle, and bypass events can still be written back once.
pub(crate) const MARKER_GRACE_SECS: u64 = 3600;

/// A global quota's period expiries: markers at the end plus [`MARKER_GRACE_SECS`];
/// counters and events one more period (the previous period stays readable).
pub(crate) fn expiries(p: PeriodId) -> (u64, u64) {
    let markers = p.end.saturating_add(MARKER_GRACE_SECS);
    (markers, p.end.saturating_add(p.len()).max(markers))
}

/// The store request of `op` on `digest` in period `p` of `route`.
pub(crate) fn store_request(route: &str, p: PeriodId, digest: &str, op: QuotaOp) -> QuotaRequest {
    let (markers_until, keep_until) = expiries(p);
    QuotaRequest {
        keys: QuotaKeys::new(route, &p.to_string(), digest),
        op,
        markers_until,
        keep_until,
    }
}

/// One store call bounded by `timeout` (raced against the frontend's timer).
pub(crate) async fn ask_store<T: Timer>(
    store: &Arc<dyn GlobalStore>,
    req: QuotaRequest,
    timeout: Duration,
    timer: &T,
) -> Result<QuotaReply, StoreError> {
    let fut = store.quota(req);
    let sleep = core::pin::pin!(timer.sleep(timeout));
    match select(fut, sleep).await {
        Either::Left(r) => r,
        Either::Right(()) => Err(StoreError::new(
            StoreErrorKind::Timeout,
            format!("timed out after {timeout:?}"),
        )),
    }
}

/// Where a global quota asks, and who writes its events.
pub(crate) struct GlobalCtx<'a, T> {
    /// The installed store (`None`: behaves as a failing store).
    pub store: Option<Arc<dyn GlobalStore>>,
    /// `[store] timeout_ms`.
    pub timeout: Duration,
    /// The frontend's timer.
    pub timer: &'a T,
    /// Revision and instance of the events.
    pub writer: Writer<'a>,
}

/// A global quota's store failed and `on_store_error = "deny"` (→ 503).
pub(crate) struct StoreDown;

/// Makes bypass ids unique within an instance's run (with its start time, across runs).
static BYPASS_SEQ: AtomicU64 = AtomicU64::new(0);

/// Bypass events one request writes back before its own call: the rest go with the next
/// requests, so no single request waits for a whole outage's backlog.
const WRITE_BACK_PER_REQUEST: usize = 16;

/// The global quota gate: first the write-back of some bypass events (the store is asked
/// anyway, and only one request at a time writes back), then one script call that passes
/// a duplicate event id, refuses an exhausted key, or consumes provisionally.
pub(crate) async fn gate_global<T: Timer>(
    q: &QuotaPolicy,
    ledger: &Arc<RouteLedger>,
    route_id: &str,
    a: &Ask,
    metrics: &RouteMetrics,
    cx: GlobalCtx<'_, T>,
) -> Result<Gate, StoreDown> {
    let unix = cx.writer.unix;
    let period = q.period.at(unix);
    let t = period.secs_to_end(unix);
    let digest = digest_hex(a.digest);
    let answer = match &cx.store {
        None => Err(StoreError::new(
            StoreErrorKind::Unavailable,
            "no global store installed",
        )),
        Some(store) => {
            write_back(
                q,
                ledger,
                store,
                cx.timeout,
                cx.timer,
                unix,
                WRITE_BACK_PER_REQUEST,
            )
            .await;
            let event = event_json(
                route_id,
                period,
                &digest,
                a.event_id.clone(),
                Kind::Consume,
                a.cost as i64,
                cx.writer,
            );
            let op = QuotaOp::Consume {
                limit: q.limit,
                cost: a.cost,
                event_id: a.event_id.clone(),
                event,
            };
            let req = store_request(route_id, period, &digest, op);
            ask_store(store, req, cx.timeout, cx.timer).await
        }
    };
    let remaining = |r: &QuotaReply| {
        QuotaCount {
            used: r.used,
            pending: 0,
            adjusted: r.adjusted,
        }
        .remaining(q.limit)
    };
    let (held, rem, exhausted) = match answer {
        Ok(r) => match r.status {
            QuotaStatus::Done => {
                let store = cx.store.clone().ok_or(StoreDown)?;
                let release = store_request(
                    route_id,
                    period,
                    &digest,
                    QuotaOp::Release {
                        entry: r.entry.clone(),
                        cost: a.cost,
                        event_id: a.event_id.clone(),
                    },
                );
                let held = Held::Global {
                    store,
                    release,
                    cost: a.cost,
                };
                (Some(held), remaining(&r), None)
            }
            QuotaStatus::Duplicate => {
                metrics.quota_duplicates.inc();
                (None, remaining(&r), None)
            }
            QuotaStatus::Exhausted => {
                metrics.quota_exhausted.inc();
                (None, remaining(&r), Some(t))
            }
        },
        Err(_) if q.on_store_error == OnStoreError::Deny => return Err(StoreDown),
        Err(_) => {
            metrics.bypassed.inc();
            let event_id = a.event_id.clone().unwrap_or_else(|| {
                let n = BYPASS_SEQ.fetch_add(1, Ordering::Relaxed);
                format!("bypass-{}-{}-{n}", cx.writer.instance, *START)
            });
            let held = Held::Bypass {
                ledger: ledger.clone(),
                digest: a.digest,
                cost: a.cost,
                event_id,
            };
            let mut g = Gate {
                held: Some(held),
                headers: Vec::new(),
                exhausted: None,
            };
            g.headers
                .push(("x-weir-ratelimit", HeaderText::from_static("bypassed")));
            return Ok(g);
        }
    };
    Ok(Gate {
        held,
        headers: quota_headers(q, ledger, route_id, period, rem, t),
        exhausted,
    })
}

/// The process start in Unix nanoseconds (part of generated bypass ids).
static START: std::sync::LazyLock<u128> = std::sync::LazyLock::new(|| {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
});

/// A ledger event as JSON (the store keeps it as the entry's `e` field).
fn event_json(
    route: &str,
    period: PeriodId,
    digest: &str,
    event_id: Option<String>,
    kind: Kind,
    amount: i64,
    w: Writer<'_>,
) -> String {
    let e = Event {
        ts: crate::accesslog::rfc3339(w.unix, 0),
        period: period.to_string(),
        route: route.to_string(),
        key_digest: digest.to_string(),
        event_id,
        kind,
        amount,
        revision: w.revision,
        instance: w.instance.to_string(),
    };
    serde_json::to_string(&e).unwrap_or_default()
}

/// Writes the route's pending bypass events to the store, oldest first, one script call
/// each, until one fails. Each is idempotent by its event id in the store, so a write the
/// gateway did not see succeed (a timeout, a crash) is simply sent again: counted once.
/// Events whose period's markers have expired are dropped from the queue (they stay in
/// the local ledger file), since the store could no longer tell a repeat.
pub(crate) async fn write_back<T: Timer>(
    q: &QuotaPolicy,
    ledger: &RouteLedger,
    store: &Arc<dyn GlobalStore>,
    timeout: Duration,
    timer: &T,
    unix: u64,
    max: usize,
) -> usize {
    if !ledger.has_pending() {
        return 0;
    }
    let Some(_turn) = ledger.write_back_turn() else {
        return 0;
    };
    let mut written = 0;
    while written < max
        && let Some(e) = ledger.next_pending()
    {
        let Some(p) = q.period.parse(&e.period) else {
            ledger.written_back(&e);
            continue;
        };
        if unix >= expiries(p).0 {
            ledger.written_back(&e);
            continue;
        }
        let op = QuotaOp::Bypass {
            cost: e.amount.max(0) as u64,
            event_id: e.event_id.clone().unwrap_or_default(),
            event: serde_json::to_string(&e).unwrap_or_default(),
        };
        let req = store_request(&e.route, p, &e.key_digest, op);
        match ask_store(store, req, timeout, timer).await {
            Ok(_) => {
                ledger.written_back(&e);
                written += 1;
            }
            Err(_) => break,
        }
    }
    written
}

impl Held {
    /// Settles the reservation: one `consume` event (`consume`), or nothing. With
    /// `sync = "always"` a ledger that cannot be written or synced is reported as the
    /// message (the request is already on its way; the unit stays counted in memory);
    /// otherwise the event is only handed to the ledger's writer thread.
    pub(crate) fn settle(
        self,
        consume: bool,
        w: Writer<'_>,
        metrics: &RouteMetrics,
    ) -> Result<(), String> {
        match self {
            Held::Local {
                ledger,
                ticket,
                cost,
            } => {
                if !consume {
                    ledger.release(&ticket);
                    return Ok(());
                }
                match ledger.commit(&ticket, w)? {
                    true => metrics.quota_consumed.inc_by(cost),
                    false => metrics.quota_duplicates.inc(),
                };
            }
            Held::Global {
                store,
                release,
                cost,
            } => {
                if consume {
                    metrics.quota_consumed.inc_by(cost);
                } else {
                    // Sent at once (see `GlobalStore::quota`); the answer is not awaited.
                    drop(store.quota(release));
                }
            }
            Held::Bypass {
                ledger,
                digest,
                cost,
                event_id,
            } => {
                if consume && ledger.record_bypass(digest, cost, &event_id, w)? {
                    metrics.quota_consumed.inc_by(cost);
                }
            }
        }
        Ok(())
    }
}
