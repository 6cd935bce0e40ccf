//! The admin API listener: a Pingora HTTP app that answers with `Engine::admin`.
//!
//! The engine implements every admin path (docs/HTTP.md, admin API); this app only reads the request
//! head, drains any body (so keep-alive stays in sync), writes the answer, and re-attaches
//! the global store when a reload changed `[store]`.

use async_trait::async_trait;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use weir_policy::Engine;

/// `ServeHttp` app over [`Engine::admin`].
pub struct AdminApp {
    engine: Engine,
}

impl AdminApp {
    /// The admin API of `engine`.
    pub fn new(engine: Engine) -> AdminApp {
        AdminApp { engine }
    }
}

#[async_trait]
impl ServeHttp for AdminApp {
    async fn response(&self, session: &mut ServerSession) -> http::Response<Vec<u8>> {
        while let Ok(Some(_)) = session.read_request_body().await {}
        let (method, path) = {
            let req = session.req_header();
            (req.method.as_str().to_owned(), req.uri.path().to_owned())
        };
        let engine = self.engine.clone();
        // Reload reads and compiles a file: keep it off the event loop.
        let resp = tokio::task::spawn_blocking(move || {
            let reload = method == "POST" && path == "/admin/reload";
            let store_before = reload.then(|| engine.store_config());
            let resp = engine.admin(&method, &path);
            if let Some(before) = store_before
                && resp.status == 200
            {
                reattach_store(&engine, before);
            }
            resp
        })
        .await
        .unwrap_or_else(|_| weir_policy::GatewayResponse {
            status: 500,
            headers: vec![("content-type", "text/plain".into())],
            body: b"admin handler panicked\n".to_vec(),
        });
        let mut b = http::Response::builder().status(resp.status);
        for (name, value) in &resp.headers {
            b = b.header(*name, value.as_str());
        }
        b.header("content-length", resp.body.len().to_string())
            .body(resp.body)
            .unwrap_or_else(|_| http::Response::new(Vec::new()))
    }
}

/// After a successful reload: a changed `[store]` section gets a new store (a removed one
/// keeps the old store installed; no global route can use it any more) — as on
/// weir-gateway.
fn reattach_store(engine: &Engine, before: Option<weir_policy::StoreConfig>) {
    let now = engine.store_config();
    if now == before || now.is_none() {
        return;
    }
    match weir_redis::attach(engine.clone()) {
        Ok(_) => eprintln!("weir-pingora: [store] changed on reload: new store attached"),
        Err(e) => eprintln!(
            "weir-pingora: [store] changed on reload but the new store cannot start ({e}); \
             the previous store keeps serving"
        ),
    }
}
