//! The quota admin endpoints (docs/HTTP.md, "Quotas"): a key's state with its
//! `ledger_sum` recomputed from the file, adjustments, and a period's events. The engine's
//! admin router calls these with the revision serving now.

use super::ledger::{Event, KeyReport, Kind, RouteLedger, Writer, digest_hex};
use super::service::store_request;
use crate::response::GatewayResponse;
use crate::runtime::Live;
use crate::store::Scope;
use crate::store::{GlobalStore, QuotaOp, QuotaReply, QuotaStatus};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};
use weir_core::{PeriodId, QuotaCount};

/// The installed store, for global quotas (the admin API reads them from it).
pub(crate) type StoreRef = Option<Arc<dyn GlobalStore>>;

/// One store call from the admin thread: parks the thread until the store's future
/// wakes it (the Redis store answers from its client thread), bounded by `[store]
/// timeout_ms` and a second more — the store bounds every call by its own timeout, the
/// margin only keeps a store that never answers from holding the admin thread.
fn store_call(
    store: &StoreRef,
    timeout: Duration,
    route: &str,
    p: PeriodId,
    digest: &str,
    op: QuotaOp,
) -> Result<QuotaReply, GatewayResponse> {
    let Some(s) = store else {
        return Err(bad(503, "no global store installed"));
    };
    let limit = timeout.saturating_add(Duration::from_secs(1));
    match wait(s.quota(store_request(route, p, digest, op)), limit) {
        Some(r) => r.map_err(|e| bad(503, format!("quota store: {e}"))),
        None => Err(bad(503, format!("quota store: no answer within {limit:?}"))),
    }
}

/// Wakes a parked thread.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives `f` on this thread, parked between polls until its waker is called; `None`
/// when it is not ready within `limit`.
fn wait<F: Future>(f: F, limit: Duration) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = core::pin::pin!(f);
    let until = Instant::now() + limit;
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return Some(v);
        }
        let left = until.checked_duration_since(Instant::now())?;
        // A spurious or early unpark just polls again.
        std::thread::park_timeout(left);
    }
}

/// Whether `route`'s quota is global.
fn is_global(live: &Live, route: &str) -> bool {
    live.routes
        .iter()
        .find(|r| r.policy.id == route)
        .and_then(|r| r.policy.quota.as_ref())
        .is_some_and(|q| q.scope == Scope::Global)
}

/// A global key's state from the store.
fn global_report(
    store: &StoreRef,
    timeout: Duration,
    route: &str,
    p: PeriodId,
    digest: u128,
) -> Result<KeyReport, GatewayResponse> {
    let r = store_call(
        store,
        timeout,
        route,
        p,
        &digest_hex(digest),
        QuotaOp::Report,
    )?;
    Ok(KeyReport {
        period: p.to_string(),
        count: QuotaCount {
            used: r.used,
            pending: 0,
            adjusted: r.adjusted,
        },
        ledger_sum: r.ledger_sum,
    })
}

fn bad(status: u16, msg: impl Into<String>) -> GatewayResponse {
    GatewayResponse::json(status, &json!({"error": msg.into()}))
}

/// The query parameter `name` (form-urlencoded).
fn param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// The route's ledger and its policy limit, or the error response.
fn ledger_of(live: &Live, route: Option<&str>) -> Result<(Arc<RouteLedger>, u64), GatewayResponse> {
    let route = route.ok_or_else(|| bad(400, "missing parameter: route"))?;
    let rt = live
        .routes
        .iter()
        .find(|r| r.policy.id == route)
        .ok_or_else(|| bad(404, format!("unknown route {route:?}")))?;
    match (&rt.quota, &rt.policy.quota) {
        (Some(l), Some(q)) => Ok((l.clone(), q.limit)),
        _ => Err(bad(404, format!("route {route:?} has no quota"))),
    }
}

/// `key=A|B` → the key's digest on `route` (the parts' raw values, as a request sends them).
fn digest(route: &str, key: &str) -> u128 {
    crate::descriptor::digest_of_parts(route, key.split('|').map(str::as_bytes))
}

fn state_json(route: &str, limit: u64, r: &KeyReport) -> serde_json::Value {
    json!({
        "route": route,
        "period": r.period,
        "limit": limit,
        "adjusted": r.count.adjusted,
        "used": r.count.used,
        "remaining": r.count.remaining(limit),
        "ledger_sum": r.ledger_sum,
    })
}

/// `GET /admin/quota?route=ID&key=VALUE`.
pub(crate) fn state(live: &Live, store: &StoreRef, query: &str, unix: u64) -> GatewayResponse {
    let route = param(query, "route");
    let (l, limit) = match ledger_of(live, route.as_deref()) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let route = route.unwrap_or_default();
    let Some(key) = param(query, "key") else {
        return bad(400, "missing parameter: key");
    };
    if is_global(live, &route) {
        return match global_report(
            store,
            live.store_timeout(),
            &route,
            l.period_at(unix),
            digest(&route, &key),
        ) {
            Ok(r) => GatewayResponse::json(200, &state_json(&route, limit, &r)),
            Err(resp) => resp,
        };
    }
    match l.report(digest(&route, &key), l.period_at(unix), unix) {
        Ok(r) => GatewayResponse::json(200, &state_json(&route, limit, &r)),
        Err(e) => bad(500, e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdjustBody {
    route: String,
    key: String,
    amount: i64,
    #[serde(default)]
    reason: Option<String>,
    event_id: String,
    #[serde(default)]
    period: Option<String>,
}

/// `POST /admin/quota/adjust` with `{"route", "key", "amount", "reason", "event_id"[, "period"]}`.
pub(crate) fn adjust(live: &Live, store: &StoreRef, body: &[u8], unix: u64) -> GatewayResponse {
    let b: AdjustBody = match serde_json::from_slice(body) {
        Ok(b) => b,
        Err(e) => return bad(400, format!("invalid body: {e}")),
    };
    let (l, limit) = match ledger_of(live, Some(&b.route)) {
        Ok(x) => x,
        Err(r) => return r,
    };
    if b.event_id.is_empty() || b.event_id.len() > super::service::MAX_EVENT_ID_BYTES {
        return bad(400, "event_id: must be 1 to 256 bytes");
    }
    let period = match b.period.as_deref() {
        None => None,
        Some(p) => match l.period_at(unix).period.parse(p) {
            Some(id) => Some(id),
            None => return bad(400, format!("period: {p:?} is not a period of this quota")),
        },
    };
    let w = Writer {
        revision: live.revision,
        instance: &live.set.server.instance,
        unix,
    };
    let _ = b.reason;
    if is_global(live, &b.route) {
        let p = period.unwrap_or_else(|| l.period_at(unix));
        let d = digest(&b.route, &b.key);
        let e = Event {
            ts: crate::accesslog::rfc3339(unix, 0),
            period: p.to_string(),
            route: b.route.clone(),
            key_digest: digest_hex(d),
            event_id: Some(b.event_id.clone()),
            kind: Kind::Adjust,
            amount: b.amount,
            revision: w.revision,
            instance: w.instance.to_string(),
        };
        let op = QuotaOp::Adjust {
            amount: b.amount,
            event_id: b.event_id.clone(),
            event: serde_json::to_string(&e).unwrap_or_default(),
        };
        let fresh = match store_call(store, live.store_timeout(), &b.route, p, &digest_hex(d), op) {
            Ok(r) => r.status == QuotaStatus::Done,
            Err(resp) => return resp,
        };
        return match global_report(store, live.store_timeout(), &b.route, p, d) {
            Ok(r) => {
                let mut v = state_json(&b.route, limit, &r);
                if let Some(o) = v.as_object_mut() {
                    o.insert("applied".into(), fresh.into());
                }
                GatewayResponse::json(200, &v)
            }
            Err(resp) => resp,
        };
    }
    match l.adjust(digest(&b.route, &b.key), b.amount, &b.event_id, period, w) {
        Ok((fresh, r)) => {
            let mut v = state_json(&b.route, limit, &r);
            if let Some(o) = v.as_object_mut() {
                o.insert("applied".into(), fresh.into());
            }
            GatewayResponse::json(200, &v)
        }
        Err(e) => bad(500, e),
    }
}

/// `GET /admin/quota/ledger?route=ID&period=P` → the period's events as JSON lines.
pub(crate) fn ledger(live: &Live, store: &StoreRef, query: &str, unix: u64) -> GatewayResponse {
    let route = param(query, "route");
    let (l, _) = match ledger_of(live, route.as_deref()) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let current = l.period_at(unix);
    let period = match param(query, "period") {
        None => current,
        Some(p) => match current.period.parse(&p) {
            Some(id) => id,
            None => return bad(400, format!("period: {p:?} is not a period of this quota")),
        },
    };
    if is_global(live, route.as_deref().unwrap_or_default()) {
        let route = route.unwrap_or_default();
        return match store_call(
            store,
            live.store_timeout(),
            &route,
            period,
            "",
            QuotaOp::Ledger,
        ) {
            Ok(r) => {
                let mut out = String::new();
                for e in &r.events {
                    out.push_str(e);
                    out.push('\n');
                }
                GatewayResponse::text(200, "application/x-ndjson", out)
            }
            Err(resp) => resp,
        };
    }
    match l.events(&period.to_string()) {
        Ok(events) => {
            let mut out = String::new();
            for e in &events {
                out.push_str(&serde_json::to_string::<Event>(e).unwrap_or_default());
                out.push('\n');
            }
            GatewayResponse::text(200, "application/x-ndjson", out)
        }
        Err(e) => bad(500, e),
    }
}

#[cfg(test)]
mod tests {
    use super::wait;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::task::{Poll, Waker};
    use std::time::{Duration, Instant};

    /// A future made ready by another thread after `after`, which wakes it once; counts
    /// its polls.
    fn ready_later(after: Duration, polls: Arc<AtomicU32>) -> impl Future<Output = u8> {
        let done = Arc::new(AtomicBool::new(false));
        let mut started = false;
        core::future::poll_fn(move |cx| {
            polls.fetch_add(1, Ordering::Relaxed);
            if done.load(Ordering::Acquire) {
                return Poll::Ready(7);
            }
            if !started {
                started = true;
                let (done, waker): (_, Waker) = (done.clone(), cx.waker().clone());
                std::thread::spawn(move || {
                    std::thread::sleep(after);
                    done.store(true, Ordering::Release);
                    waker.wake();
                });
            }
            Poll::Pending
        })
    }

    /// The admin thread parks until the store's answer wakes it (a couple of polls, not a
    /// spin), and gives up at its limit.
    #[test]
    fn waits_parked_for_the_wake_and_gives_up_at_the_limit() {
        let polls = Arc::new(AtomicU32::new(0));
        let t = Instant::now();
        let got = wait(
            ready_later(Duration::from_millis(50), polls.clone()),
            Duration::from_secs(5),
        );
        assert_eq!(got, Some(7));
        assert!(t.elapsed() >= Duration::from_millis(50));
        assert!(polls.load(Ordering::Relaxed) < 10, "{polls:?} polls");
        let t = Instant::now();
        let never = wait(core::future::pending::<()>(), Duration::from_millis(30));
        assert_eq!(never, None);
        assert!(t.elapsed() >= Duration::from_millis(30));
    }
}
