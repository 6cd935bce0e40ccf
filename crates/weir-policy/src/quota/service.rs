//! The quota step of a request: the route's ledger (kept across reloads while its
//! directory, period and sync are unchanged), the gate that reserves a request's cost, and
//! the settlement that commits it once every later gate admitted (or gives it back).
//!
//! Reserving at the gate and committing later is what makes "a request any gate rejects
//! consumes nothing" hold without a leak: a reservation counts against the limit while the
//! request is being admitted (two concurrent requests cannot both take the last unit), and
//! is either one `consume` event or nothing.

use super::layer::{Cost, QuotaPolicy, QuotaSettings};
use super::ledger::{Reserved, RouteLedger, Ticket, Writer};
use crate::descriptor::Headers;
use crate::metrics::RouteMetrics;
use crate::policy::PolicySet;
use crate::text::HeaderText;
use std::collections::HashMap;
use std::sync::Arc;

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
pub(crate) struct Held {
    ledger: Arc<RouteLedger>,
    ticket: Ticket,
    cost: u64,
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
            Some(Held {
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
    let headers = if q.headers {
        vec![
            (
                "ratelimit-policy",
                HeaderText::from(format!(
                    "\"{route_id}.quota\";q={};w={}",
                    q.limit,
                    period.len()
                )),
            ),
            (
                "ratelimit",
                HeaderText::from(format!("\"{route_id}.quota\";r={remaining};t={t}")),
            ),
        ]
    } else {
        Vec::new()
    };
    Ok(Gate {
        held,
        headers,
        exhausted,
    })
}

impl Held {
    /// Settles the reservation: one `consume` event (`consume`), or nothing. A ledger
    /// that cannot be written is reported as the message (the request is already on its
    /// way; the unit stays counted in memory).
    pub(crate) fn settle(
        self,
        consume: bool,
        w: Writer<'_>,
        metrics: &RouteMetrics,
    ) -> Result<(), String> {
        if !consume {
            self.ledger.release(&self.ticket);
            return Ok(());
        }
        match self.ledger.commit(&self.ticket, w)? {
            true => metrics.quota_consumed.inc_by(self.cost),
            false => metrics.quota_duplicates.inc(),
        };
        Ok(())
    }
}
