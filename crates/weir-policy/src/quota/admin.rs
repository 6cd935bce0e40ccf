//! The quota admin endpoints (docs/HTTP.md, "Quotas"): a key's state with its
//! `ledger_sum` recomputed from the file, adjustments, and a period's events. The engine's
//! admin router calls these with the revision serving now.

use super::ledger::{Event, KeyReport, RouteLedger, Writer};
use crate::auth::service::unix_now;
use crate::response::GatewayResponse;
use crate::runtime::Live;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

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
pub(crate) fn state(live: &Live, query: &str) -> GatewayResponse {
    let route = param(query, "route");
    let (l, limit) = match ledger_of(live, route.as_deref()) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let route = route.unwrap_or_default();
    let Some(key) = param(query, "key") else {
        return bad(400, "missing parameter: key");
    };
    let unix = unix_now();
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
pub(crate) fn adjust(live: &Live, body: &[u8]) -> GatewayResponse {
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
    let unix = unix_now();
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
pub(crate) fn ledger(live: &Live, query: &str) -> GatewayResponse {
    let route = param(query, "route");
    let (l, _) = match ledger_of(live, route.as_deref()) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let unix = unix_now();
    let current = l.period_at(unix);
    let period = match param(query, "period") {
        None => current,
        Some(p) => match current.period.parse(&p) {
            Some(id) => id,
            None => return bad(400, format!("period: {p:?} is not a period of this quota")),
        },
    };
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
