//! The admin API listener: a Pingora HTTP app that answers with `Engine::admin`.
//!
//! The engine implements every admin path (docs/HTTP.md, admin API); this app only reads the request
//! head and body (draining what it does not keep, so keep-alive stays in sync) and writes the answer (a reload
//! re-attaches the global store inside the engine).

use async_trait::async_trait;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use weir_policy::Engine;

/// The most of an admin request body that is kept (the rest is drained).
const MAX_ADMIN_BODY: usize = 1 << 20;

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
        // `POST /admin/rollback` and `POST /admin/quota/adjust` read JSON; other bodies are only drained.
        let mut body = Vec::new();
        while let Ok(Some(b)) = session.read_request_body().await {
            if body.len() < MAX_ADMIN_BODY {
                body.extend_from_slice(&b[..b.len().min(MAX_ADMIN_BODY - body.len())]);
            }
        }
        let (method, path, auth) = {
            let req = session.req_header();
            // Only the credential is handed over (admin_token_env); it is never logged.
            let auth: Vec<(String, String)> = req
                .headers
                .get(http::header::AUTHORIZATION)
                .map(|v| {
                    (
                        "authorization".to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .into_iter()
                .collect();
            (
                req.method.as_str().to_owned(),
                req.uri
                    .path_and_query()
                    .map_or_else(|| req.uri.path().to_owned(), |pq| pq.as_str().to_owned()),
                auth,
            )
        };
        let engine = self.engine.clone();
        // Reload reads and compiles a file: keep it off the event loop.
        let resp = tokio::task::spawn_blocking(move || {
            let resp = engine.admin_request(&method, &path, &auth, &body);
            // The engine re-attaches its store on reload itself; it only reports what it did.
            // Not `eprintln!`: it panics when stderr is a closed pipe.
            for n in engine.take_notices() {
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "weir-pingora: {n}");
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
