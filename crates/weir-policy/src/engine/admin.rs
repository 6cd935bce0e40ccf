//! The admin API router (see docs/HTTP.md, "Admin API") and the record of requests a
//! frontend refuses before they are understood.

use super::{Engine, RollbackError};
use crate::accesslog::{Record, rfc3339_ms};
use crate::descriptor::{Headers, bearer_token};
use crate::outcome::Outcome;
use crate::response::{GatewayResponse, NO_ROUTE_JSON, acceptable_request_id, error_response};
use crate::runtime::Shared;
use crate::text::HeaderText;
use serde_json::json;
use subtle::ConstantTimeEq;

impl Engine {
    /// For responses the frontend makes before a request is understood
    /// ([`Outcome::BadRequest`], [`Outcome::ClientTimeout`], [`Outcome::UriTooLong`],
    /// [`Outcome::HeadersTooLarge`], [`Outcome::HttpVersionNotSupported`]): counted under
    /// route `-` and logged; the status is [`Outcome::status`].
    pub fn reject_malformed(&self, outcome: Outcome, request_id: Option<&str>) -> GatewayResponse {
        reject_malformed(&self.inner.shared, outcome, request_id)
    }

    /// The admin API (see docs/HTTP.md): `/metrics`, `/healthz`, `/admin/config`,
    /// `/admin/reload`, `/admin/rollback`, `/admin/breakers`, `/admin/bypass`,
    /// `/admin/upstreams`; 405 for other methods there, 404 elsewhere.
    ///
    /// Without a credential: with `admin_token_env` set, only `GET /healthz` answers (use
    /// [`Engine::admin_with`] to pass the request's headers).
    pub fn admin(&self, method: &str, path: &str) -> GatewayResponse {
        self.admin_with(method, path, &())
    }

    /// [`Engine::admin`] with the request's headers: with `admin_token_env` set, every
    /// request but `GET /healthz` needs `Authorization: Bearer <token>` (401 otherwise,
    /// compared in constant time); with `admin_read_only`, every POST is 405.
    pub fn admin_with(&self, method: &str, path: &str, headers: &dyn Headers) -> GatewayResponse {
        self.admin_request(method, path, headers, &[])
    }

    /// [`Engine::admin_with`] with the request's body (`POST /admin/rollback` reads
    /// `{"revision": N}` from it, `POST /admin/quota/adjust` JSON); `target` is the path with its query (`/admin/quota?route=..&key=..`).
    pub fn admin_request(
        &self,
        method: &str,
        target: &str,
        headers: &dyn Headers,
        body: &[u8],
    ) -> GatewayResponse {
        let path = target;
        let server = self.server();
        let bare = path.split('?').next().unwrap_or(path);
        let health = bare == "/healthz" && (method == "GET" || method == "HEAD");
        if let Some(want) = &server.admin_token_sha256
            && !health
        {
            let got = bearer_token(headers).map(|t| crate::check::sha256(t.as_bytes()));
            let ok = got.is_some_and(|g| bool::from(g.ct_eq(want)));
            if !ok {
                let mut r = GatewayResponse::json(401, &json!({"error": "unauthorized"}));
                r.headers
                    .push(("www-authenticate", HeaderText::from_static("Bearer")));
                return r;
            }
        }
        if server.admin_read_only && method == "POST" {
            let mut r = GatewayResponse::json(
                405,
                &json!({"error": "method_not_allowed", "read_only": true}),
            );
            r.headers
                .push(("allow", HeaderText::from_static("GET, HEAD")));
            return r;
        }
        route(self, method, path, body)
    }
}

/// `POST /admin/rollback` with `{"revision": N}`.
fn rollback(engine: &Engine, body: &[u8]) -> GatewayResponse {
    let want = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("revision")?.as_u64());
    let Some(want) = want else {
        return GatewayResponse::json(
            400,
            &json!({"error": "the body must be {\"revision\": N}", "revision": engine.revision()}),
        );
    };
    match engine.rollback(want) {
        Ok(rev) => GatewayResponse::json(
            200,
            &json!({
                "revision": rev,
                "rolled_back_to": want,
                "note": "the config file was not rewritten: the next reload reads the file again",
            }),
        ),
        Err(e) => {
            let status = match e {
                RollbackError::Unknown(_) => 404,
                RollbackError::Config(_) => 400,
            };
            GatewayResponse::json(
                status,
                &json!({"error": e.to_string(), "revision": engine.revision()}),
            )
        }
    }
}

fn route(engine: &Engine, method: &str, target: &str, body: &[u8]) -> GatewayResponse {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let allowed = match path {
        "/metrics" | "/healthz" | "/admin/config" | "/admin/breakers" | "/admin/bypass"
        | "/admin/upstreams" => "GET",
        "/admin/quota" | "/admin/quota/ledger" => "GET",
        "/admin/reload" | "/admin/rollback" | "/admin/quota/adjust" => "POST",
        _ => return GatewayResponse::json(404, &json!({"error": "not_found", "path": path})),
    };
    if !(method == allowed || (allowed == "GET" && method == "HEAD")) {
        let mut r = GatewayResponse::json(
            405,
            &json!({"error": "method_not_allowed", "allow": allowed}),
        );
        let allow = if allowed == "GET" {
            "GET, HEAD"
        } else {
            allowed
        };
        r.headers.push(("allow", HeaderText::from_static(allow)));
        return r;
    }
    let shared = &engine.inner.shared;
    let live = shared.live.load();
    match path {
        "/metrics" => GatewayResponse::text(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            engine.metrics_text(),
        ),
        "/healthz" => GatewayResponse::json(
            200,
            &json!({"status": "ok", "instance": live.set.server.instance, "revision": live.revision}),
        ),
        "/admin/config" => {
            let mut v = serde_json::to_value(&*live.set).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("revision".into(), live.revision.into());
                o.insert("history".into(), engine.history_json());
            }
            GatewayResponse::json(200, &v)
        }
        "/admin/breakers" => {
            let now = engine.now();
            let list: Vec<serde_json::Value> = live
                .routes
                .iter()
                .filter_map(|r| Some(r.breaker.as_ref()?.json(&r.policy.id, &r.metrics, now)))
                .collect();
            GatewayResponse::json(200, &json!({"revision": live.revision, "breakers": list}))
        }
        "/admin/bypass" => {
            let now = engine.now();
            let episodes: Vec<serde_json::Value> = live
                .routes
                .iter()
                .filter_map(|r| {
                    let b = r.rate_limit.as_ref()?.bypass.as_ref()?;
                    let d = r.policy.rate_limit.as_ref()?.allow_for?;
                    Some(b.json(&r.policy.id, now, d.nanos()))
                })
                .flatten()
                .collect();
            GatewayResponse::json(200, &json!({"episodes": episodes}))
        }
        "/admin/rollback" => {
            drop(live);
            rollback(engine, body)
        }
        "/admin/upstreams" => {
            let now = engine.now();
            let list: Vec<serde_json::Value> = live.upstreams.iter().map(|u| u.json(now)).collect();
            GatewayResponse::json(200, &json!({"revision": live.revision, "upstreams": list}))
        }
        "/admin/quota" => crate::quota::admin::state(&live, &quota_store(shared), query),
        "/admin/quota/ledger" => crate::quota::admin::ledger(&live, &quota_store(shared), query),
        "/admin/quota/adjust" => crate::quota::admin::adjust(&live, &quota_store(shared), body),
        _ => {
            drop(live);
            match engine.reload() {
                Ok(rev) => GatewayResponse::json(200, &json!({"revision": rev})),
                Err(e) => GatewayResponse::json(
                    400,
                    &json!({"error": e.to_string(), "revision": engine.revision()}),
                ),
            }
        }
    }
}

/// A response the frontend makes before a request is understood: counted under route `-`
/// and logged.
fn reject_malformed(
    shared: &Shared,
    outcome: Outcome,
    request_id: Option<&str>,
) -> GatewayResponse {
    let live = shared.live.load();
    let rid = request_id
        .and_then(|r| acceptable_request_id(r.as_bytes()))
        .map(str::to_string)
        .unwrap_or_else(|| shared.new_request_id().into());
    let instance = &live.set.server.instance;
    let status = outcome.status();
    shared.metrics.count_request("-", outcome);
    shared.log.write(&Record {
        ts: rfc3339_ms(shared.clock.unix_millis()),
        request_id: rid.clone(),
        instance: instance.clone(),
        route: "-".into(),
        method: String::new(),
        path: String::new(),
        client: None,
        status,
        reason: Some(outcome),
        key_digest: None,
        consumer_digest: None,
        scope: None,
        remaining: None,
        attempts: Vec::new(),
        queue_ms: 0,
        duration_ms: 0,
        revision: live.revision,
        shadow: None,
        ratelimit: None,
        error: None,
    });
    let rid = HeaderText::from(rid);
    error_response(
        status,
        outcome.as_str(),
        live.error_ids(NO_ROUTE_JSON, &rid),
        None,
    )
}

/// The installed global store, for the quota endpoints of global routes.
fn quota_store(shared: &crate::runtime::Shared) -> crate::quota::admin::StoreRef {
    shared.store.load_full().map(|s| (*s).clone())
}
