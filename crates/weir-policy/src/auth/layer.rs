//! `[[identities]]` and `[routes.auth]`: the file model, the compiled identities (with
//! their key material, read from the key files at compile time, so a reload re-reads them
//! and a key file that does not parse fails the reload) and the compile steps.
//!
//! Dependencies (all RustCrypto / well-kept, pure Rust, no hand-written signature code):
//! `jsonwebtoken` (feature `rust_crypto`: JWS verification over `rsa`, `p256`,
//! `ed25519-dalek`, `hmac`; only public-key verification happens here, never signing or
//! decryption with a private key), `sha2` (API-key and admin-token digests) and `subtle`
//! (constant-time comparison of those digests).

use crate::check::{Ctx, R, file_table, is_token, unknown_name};
use crate::dur::Dur;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

file_table! {
    /// One `[[identities]]` entry from the file.
    RawIdentity {
        name: String,
        kind: IdentityKind,
        jwks: Option<String>,
        secret_env: Option<String>,
        algorithms: Option<Vec<String>>,
        issuer: Option<String>,
        audience: Option<String>,
        leeway: Option<Dur>,
        header: Option<String>,
        keys: Option<String>,
    }
}

file_table! {
    /// `[routes.auth]` from the file.
    RawAuth {
        identity: String,
        scopes: Option<Vec<String>>,
        forward: Option<String>,
    }
}

/// What kind of credential an identity verifies.
#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum IdentityKind {
    /// A JWT in `Authorization: Bearer`.
    Jwt,
    /// An opaque key in a header, checked against SHA-256 digests.
    ApiKey,
}

/// One verification key of a JWT identity.
#[derive(Clone)]
pub(crate) struct JwtKey {
    pub kid: Option<String>,
    /// The JWK's `alg`, when it names one.
    pub alg: Option<Algorithm>,
    pub key: DecodingKey,
}

/// One consumer of an API-key identity.
#[derive(Debug, Clone)]
pub(crate) struct ApiConsumer {
    pub consumer: String,
    pub sha256: [u8; 32],
    pub scopes: Vec<String>,
}

/// The key material of an identity.
#[derive(Clone)]
pub(crate) enum Verifier {
    Jwt {
        keys: Vec<JwtKey>,
        algorithms: Vec<Algorithm>,
        issuer: Option<String>,
        audience: Option<String>,
        leeway: u64,
    },
    ApiKey {
        header: String,
        consumers: Vec<ApiConsumer>,
    },
}

/// A compiled `[[identities]]` entry. Serialized (for `/admin/config`) without any key
/// material or secret.
#[derive(Clone, Serialize)]
pub struct IdentityPolicy {
    /// The name routes refer to.
    pub name: String,
    /// `jwt` or `api_key`.
    pub kind: IdentityKind,
    /// The key file as written (JWKS or API-key file), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The HS256 secret's environment variable (its name, never its value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// Allowed algorithms (JWT).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub algorithms: Vec<String>,
    /// Required `iss` (JWT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Required `aud` member (JWT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// Clock skew allowed on `exp`, `nbf`, `iat` (JWT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leeway: Option<Dur>,
    /// The API-key header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// Keys (JWKS) or consumers (API keys) loaded.
    pub loaded: usize,
    /// Unique per compile: names this identity's entries in the verified-token cache, so a
    /// reload (new keys) never hits an entry verified with the old ones.
    #[serde(skip)]
    pub(crate) generation: u64,
    /// The token-cache hash key (random per compile).
    #[serde(skip)]
    pub(crate) cache_key: (u64, u64),
    /// SHA-256 over the settings and key material (equality).
    #[serde(skip)]
    fingerprint: [u8; 32],
    #[serde(skip)]
    pub(crate) verifier: Arc<Verifier>,
}

impl core::fmt::Debug for IdentityPolicy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IdentityPolicy")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("loaded", &self.loaded)
            .finish_non_exhaustive()
    }
}

impl PartialEq for IdentityPolicy {
    fn eq(&self, o: &Self) -> bool {
        self.name == o.name && self.fingerprint == o.fingerprint
    }
}

/// A compiled `[routes.auth]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuthPolicy {
    /// The identity's name.
    pub identity: String,
    /// Every one required.
    pub scopes: Vec<String>,
    /// The header the verified subject is sent upstream in (`None`: `forward = ""`).
    pub forward: Option<&'static str>,
    /// The identity itself.
    #[serde(skip)]
    pub(crate) verifier: Arc<IdentityPolicy>,
}

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// Header names an identity may not be forwarded in (they carry framing, routing or the
/// credential itself).
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
    "authorization",
    "cookie",
    "x-request-id",
    "x-weir-budget-ms",
];

/// `forward` names are `&'static str` like every other upstream request header the engine
/// adds; each distinct name is leaked once, however many reloads name it.
fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut v = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = v.iter().find(|n| **n == name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    v.push(n);
    n
}

fn random_key() -> (u64, u64) {
    use std::hash::{BuildHasher, Hasher};
    let s = std::collections::hash_map::RandomState::new();
    let mut a = s.build_hasher();
    a.write_u64(GENERATION.load(Ordering::Relaxed));
    let mut b = s.build_hasher();
    b.write_u64(a.finish());
    (a.finish(), b.finish())
}

fn parse_alg(s: &str) -> Option<Algorithm> {
    use std::str::FromStr;
    // `none` and unknown names are not algorithms jsonwebtoken knows.
    Algorithm::from_str(s).ok()
}

fn is_hmac(a: Algorithm) -> bool {
    matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

/// Parses a JWKS document into verification keys (public keys only: an `oct` key is an
/// error, so an HMAC secret can never sit in a file meant for public keys).
pub(crate) fn parse_jwks(text: &str) -> Result<Vec<JwtKey>, String> {
    let set: JwkSet = serde_json::from_str(text).map_err(|e| format!("not a JWKS: {e}"))?;
    if set.keys.is_empty() {
        return Err("the JWKS has no keys".into());
    }
    let mut keys = Vec::new();
    for (i, jwk) in set.keys.iter().enumerate() {
        if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
            return Err(format!(
                "keys[{i}]: symmetric (oct) keys are not allowed in a JWKS file; use secret_env"
            ));
        }
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("keys[{i}]: {e}"))?;
        let alg = match &jwk.common.key_algorithm {
            None => None,
            Some(ka) => Some(
                parse_alg(&ka.to_string())
                    .ok_or_else(|| format!("keys[{i}]: alg {ka} is not a signature algorithm"))?,
            ),
        };
        keys.push(JwtKey {
            kid: jwk.common.key_id.clone(),
            alg,
            key,
        });
    }
    Ok(keys)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKeyFile {
    #[serde(default)]
    keys: Vec<RawKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    consumer: String,
    sha256: String,
    #[serde(default)]
    scopes: Vec<String>,
}

fn hex32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        let h = (b[2 * i] as char).to_digit(16)?;
        let l = (b[2 * i + 1] as char).to_digit(16)?;
        *o = (h * 16 + l) as u8;
    }
    Some(out)
}

/// Parses an API-key file (`[[keys]] consumer = "..", sha256 = "hex"`).
pub(crate) fn parse_key_file(text: &str) -> Result<Vec<ApiConsumer>, String> {
    let f: RawKeyFile = toml::from_str(text).map_err(|e| e.to_string().trim().to_string())?;
    let mut out: Vec<ApiConsumer> = Vec::new();
    for (i, k) in f.keys.into_iter().enumerate() {
        if k.consumer.is_empty() {
            return Err(format!("keys[{i}].consumer: must not be empty"));
        }
        let d = hex32(&k.sha256).ok_or_else(|| {
            format!("keys[{i}].sha256: must be 64 hex digits (the SHA-256 of the key)")
        })?;
        if out.iter().any(|c| c.sha256 == d) {
            return Err(format!("keys[{i}].sha256: duplicate key digest"));
        }
        out.push(ApiConsumer {
            consumer: k.consumer,
            sha256: d,
            scopes: k.scopes,
        });
    }
    if out.is_empty() {
        return Err("no [[keys]]".into());
    }
    Ok(out)
}

/// The compile step of `identities[i]`.
pub(crate) fn compile_identity(
    i: usize,
    r: RawIdentity,
    seen: &[Arc<IdentityPolicy>],
    ctx: &Ctx<'_>,
) -> R<IdentityPolicy> {
    let k = format!("identities[{i}]");
    if !is_token(&r.name) {
        return Err(ctx.err(format!("{k}.name"), "must be a non-empty token"));
    }
    if seen.iter().any(|x| x.name == r.name) {
        return Err(ctx.err(
            format!("{k}.name"),
            format!("duplicate identity {:?}", r.name),
        ));
    }
    let mut fp = Sha256::new();
    fp.update(r.name.as_bytes());
    let not_for = |key: &str, present: bool, kind: &str| {
        if present {
            Err(ctx.err(format!("{k}.{key}"), format!("not used by kind = {kind:?}")))
        } else {
            Ok(())
        }
    };
    let read_file = |key: &str, file: &str| -> R<String> {
        let path = ctx.relative(file);
        std::fs::read_to_string(&path).map_err(|e| {
            ctx.err(
                format!("{k}.{key}"),
                format!("cannot read {}: {e}", path.display()),
            )
        })
    };
    let (verifier, loaded, file) = match r.kind {
        IdentityKind::Jwt => {
            not_for("header", r.header.is_some(), "jwt")?;
            not_for("keys", r.keys.is_some(), "jwt")?;
            let (mut keys, hmac) = match (&r.jwks, &r.secret_env) {
                (Some(_), Some(_)) => {
                    return Err(ctx.err(
                        format!("{k}.secret_env"),
                        "use either jwks or secret_env, not both",
                    ));
                }
                (None, None) => {
                    return Err(ctx.err(
                        format!("{k}.jwks"),
                        "missing (a jwt identity needs jwks or secret_env)",
                    ));
                }
                (Some(f), None) => {
                    let text = read_file("jwks", f)?;
                    fp.update(text.as_bytes());
                    let keys = parse_jwks(&text).map_err(|e| {
                        ctx.err(format!("{k}.jwks"), format!("cannot parse {f}: {e}"))
                    })?;
                    (keys, false)
                }
                (None, Some(var)) => {
                    let secret = crate::check::env_var(var).ok_or_else(|| {
                        ctx.err(
                            format!("{k}.secret_env"),
                            format!("environment variable {var} is not set (or not UTF-8)"),
                        )
                    })?;
                    if secret.is_empty() {
                        return Err(ctx.err(
                            format!("{k}.secret_env"),
                            format!("environment variable {var} is empty"),
                        ));
                    }
                    fp.update(Sha256::digest(secret.as_bytes()));
                    let key = DecodingKey::from_secret(secret.as_bytes())
                        .map_err(|e| ctx.err(format!("{k}.secret_env"), e.to_string()))?;
                    (
                        vec![JwtKey {
                            kid: None,
                            alg: None,
                            key,
                        }],
                        true,
                    )
                }
            };
            let names = r
                .algorithms
                .clone()
                .unwrap_or_else(|| vec![if hmac { "HS256" } else { "RS256" }.to_string()]);
            if names.is_empty() {
                return Err(ctx.err(format!("{k}.algorithms"), "needs at least one algorithm"));
            }
            let mut algorithms = Vec::new();
            for (j, a) in names.iter().enumerate() {
                let alg = parse_alg(a).ok_or_else(|| {
                    ctx.err(
                        format!("{k}.algorithms[{j}]"),
                        format!("unknown algorithm {a:?} (e.g. RS256, ES256, EdDSA, HS256)"),
                    )
                })?;
                if is_hmac(alg) != hmac {
                    return Err(ctx.err(
                        format!("{k}.algorithms[{j}]"),
                        if hmac {
                            format!("{a} needs a jwks file; secret_env is for HS256/HS384/HS512")
                        } else {
                            format!("{a} needs secret_env; a jwks file holds public keys")
                        },
                    ));
                }
                algorithms.push(alg);
                fp.update(a.as_bytes());
            }
            // A key no allowed algorithm could use is a mistake, not a spare.
            keys.retain(|key| key.alg.is_none_or(|a| algorithms.contains(&a)));
            if keys.is_empty() {
                return Err(ctx.err(
                    format!("{k}.algorithms"),
                    "no key in the JWKS is usable with these algorithms",
                ));
            }
            let leeway = r.leeway.unwrap_or(Dur(Duration::from_secs(30)));
            for v in [&r.issuer, &r.audience].into_iter().flatten() {
                fp.update(v.as_bytes());
            }
            fp.update(leeway.0.as_secs().to_le_bytes());
            let n = keys.len();
            (
                Verifier::Jwt {
                    keys,
                    algorithms,
                    issuer: r.issuer.clone(),
                    audience: r.audience.clone(),
                    leeway: leeway.0.as_secs(),
                },
                n,
                r.jwks.clone(),
            )
        }
        IdentityKind::ApiKey => {
            for (key, present) in [
                ("jwks", r.jwks.is_some()),
                ("secret_env", r.secret_env.is_some()),
                ("algorithms", r.algorithms.is_some()),
                ("issuer", r.issuer.is_some()),
                ("audience", r.audience.is_some()),
                ("leeway", r.leeway.is_some()),
            ] {
                not_for(key, present, "api_key")?;
            }
            let header = r.header.clone().unwrap_or_else(|| "x-api-key".into());
            if !is_token(&header) {
                return Err(ctx.err(format!("{k}.header"), "must be a header name"));
            }
            let header = header.to_ascii_lowercase();
            let Some(f) = &r.keys else {
                return Err(ctx.err(
                    format!("{k}.keys"),
                    "missing (an api_key identity needs keys)",
                ));
            };
            let text = read_file("keys", f)?;
            fp.update(text.as_bytes());
            fp.update(header.as_bytes());
            let consumers = parse_key_file(&text)
                .map_err(|e| ctx.err(format!("{k}.keys"), format!("cannot parse {f}: {e}")))?;
            let n = consumers.len();
            (Verifier::ApiKey { header, consumers }, n, r.keys.clone())
        }
    };
    let (algorithms, leeway) = match &verifier {
        Verifier::Jwt { .. } => (
            r.algorithms.clone().unwrap_or_else(|| {
                vec![
                    if r.secret_env.is_some() {
                        "HS256"
                    } else {
                        "RS256"
                    }
                    .into(),
                ]
            }),
            Some(r.leeway.unwrap_or(Dur(Duration::from_secs(30)))),
        ),
        Verifier::ApiKey { .. } => (Vec::new(), None),
    };
    let header = match &verifier {
        Verifier::ApiKey { header, .. } => Some(header.clone()),
        Verifier::Jwt { .. } => None,
    };
    Ok(IdentityPolicy {
        name: r.name,
        kind: r.kind,
        file,
        secret_env: r.secret_env,
        algorithms,
        issuer: r.issuer,
        audience: r.audience,
        leeway,
        header,
        loaded,
        generation: GENERATION.fetch_add(1, Ordering::Relaxed),
        cache_key: random_key(),
        fingerprint: fp.finalize().into(),
        verifier: Arc::new(verifier),
    })
}

/// The compile step of `[routes.auth]` at key prefix `k`.
pub(crate) fn compile(
    k: &str,
    a: RawAuth,
    identities: &[Arc<IdentityPolicy>],
    ctx: &Ctx<'_>,
) -> R<AuthPolicy> {
    let Some(id) = identities.iter().find(|x| x.name == a.identity) else {
        let known = identities.iter().map(|x| x.name.as_str());
        let key = format!("{k}.identity");
        return Err(unknown_name(ctx, key, "identity", &a.identity, known));
    };
    let scopes = a.scopes.unwrap_or_default();
    for (j, s) in scopes.iter().enumerate() {
        if s.is_empty()
            || !s
                .bytes()
                .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
        {
            return Err(ctx.err(
                format!("{k}.scopes[{j}]"),
                "a scope is non-empty visible ASCII without quotes or backslashes",
            ));
        }
    }
    let forward = match a.forward.as_deref() {
        None => Some("x-weir-consumer"),
        Some("") => None,
        Some(h) if is_token(h) && !RESERVED.contains(&h.to_ascii_lowercase().as_str()) => {
            Some(intern(&h.to_ascii_lowercase()))
        }
        Some(h) => {
            return Err(ctx.err(
                format!("{k}.forward"),
                format!("{h:?} cannot carry the identity (a header name, not one of {RESERVED:?})"),
            ));
        }
    };
    Ok(AuthPolicy {
        identity: a.identity,
        scopes,
        forward,
        verifier: id.clone(),
    })
}

/// What `--check` prints for an identity.
pub(crate) fn describe_identity(i: &IdentityPolicy) -> String {
    match i.kind {
        IdentityKind::Jwt => format!(
            "jwt, {} key(s){}, algorithms [{}], issuer {}, audience {}, leeway {}",
            i.loaded,
            i.secret_env
                .as_ref()
                .map_or(String::new(), |v| format!(" (secret from ${v})")),
            i.algorithms.join(", "),
            i.issuer.as_deref().unwrap_or("any"),
            i.audience.as_deref().unwrap_or("any"),
            i.leeway.map_or_else(|| "-".to_string(), |l| l.to_string())
        ),
        IdentityKind::ApiKey => format!(
            "api_key, header {}, {} consumer(s)",
            i.header.as_deref().unwrap_or("x-api-key"),
            i.loaded
        ),
    }
}

/// What `--check` prints for a route's auth.
pub(crate) fn describe(a: &AuthPolicy) -> String {
    format!(
        "identity {}, scopes [{}], forward {}",
        a.identity,
        a.scopes.join(", "),
        a.forward.unwrap_or("(nothing)")
    )
}
