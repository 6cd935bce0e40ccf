//! `[routes.auth]` at run time: the per-request step ([`authenticate`]) — find the
//! credential, verify it (JWT: signature with an allowed algorithm and key, then `exp`,
//! `nbf`, `iat`, `iss`, `aud`, `sub`; API key: SHA-256 then a constant-time comparison
//! with every consumer's digest), check the route's scopes — and the verified-token cache.
//!
//! The cache is per thread (each frontend worker has its own: no lock, no sharing), keyed
//! by the identity's generation and a keyed 128-bit SipHash of the token (random key per
//! compiled identity, so a collision cannot be aimed), bounded to [`CACHE_MAX`] entries,
//! and an entry dies when its token does (`exp` + leeway). Only successes are cached, so a
//! failed token never affects the next request; a reload compiles new identities with new
//! generations, which drops every cached verification of the old keys.
//!
//! The credential is never stored, logged or echoed: failures carry only the outcome.

use super::layer::{AuthPolicy, IdentityPolicy, Verifier};
use crate::descriptor::{Headers, bearer_token};
use crate::outcome::Outcome;
use jsonwebtoken::{Validation, decode, decode_header};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use siphasher::sip128::{Hasher128, SipHasher24};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Bound on cached verifications per thread.
pub(crate) const CACHE_MAX: usize = 4096;

/// Longest credential looked at (the head limit bounds it anyway).
const MAX_TOKEN: usize = 16 * 1024;

/// A verified caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verified {
    /// JWT `sub`, or the API key's consumer.
    pub consumer: String,
    scopes: Vec<String>,
    /// The token's string claims.
    claims: Vec<(String, String)>,
    /// Unix seconds after which the verification no longer holds.
    expires: u64,
}

impl Verified {
    /// A string claim of the verified token.
    pub(crate) fn claim(&self, name: &str) -> Option<&str> {
        self.claims
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The consumer's digest for the access log (never the raw subject).
    pub(crate) fn consumer_digest(&self) -> String {
        let mut h = SipHasher24::new_with_keys(0x7765_6972_2d63_6f6e, 0x7375_6d65_722d_7631);
        core::hash::Hasher::write(&mut h, self.consumer.as_bytes());
        crate::descriptor::push_hex(String::with_capacity(32), h.finish128().as_u128(), 32)
    }

    /// The subject as an upstream header value: visible ASCII kept, anything else
    /// (controls, `%`, non-ASCII) percent-encoded.
    pub(crate) fn forward_value(&self) -> String {
        let mut out = String::with_capacity(self.consumer.len());
        for b in self.consumer.bytes() {
            if (0x21..=0x7e).contains(&b) && b != b'%' {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }
}

/// Why auth failed: the outcome and its `WWW-Authenticate` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub outcome: Outcome,
    pub challenge: String,
}

/// Why a JWT is invalid (tests and the fuzz target tell them apart; clients see only
/// `invalid_token`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Invalid {
    Malformed,
    Algorithm,
    UnknownKid,
    Signature,
    Expired,
    NotYetValid,
    IssuedInFuture,
    Issuer,
    Audience,
    Subject,
}

/// The system's wall-clock Unix seconds, for the test and bench hooks only: the engine reads
/// wall time from its clock (`crate::wall`), never from the system.
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn num(v: Option<&Value>) -> Result<Option<u64>, Invalid> {
    match v {
        None => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(u) = n.as_u64() {
                Ok(Some(u))
            } else if let Some(f) = n.as_f64().filter(|f| f.is_finite() && *f >= 0.0) {
                Ok(Some(f as u64))
            } else {
                Err(Invalid::Malformed)
            }
        }
        Some(_) => Err(Invalid::Malformed),
    }
}

/// Verifies a JWT against an identity at wall-clock time `now` (no cache).
pub(crate) fn verify_jwt(id: &IdentityPolicy, token: &str, now: u64) -> Result<Verified, Invalid> {
    let Verifier::Jwt {
        keys,
        algorithms,
        issuer,
        audience,
        leeway,
    } = &*id.verifier
    else {
        return Err(Invalid::Malformed);
    };
    if token.len() > MAX_TOKEN {
        return Err(Invalid::Malformed);
    }
    // `alg: none` and unknown algorithms fail to parse here.
    let header = decode_header(token).map_err(|_| Invalid::Malformed)?;
    if !algorithms.contains(&header.alg) {
        return Err(Invalid::Algorithm);
    }
    let family = header.alg.family();
    let usable = |k: &&super::layer::JwtKey| {
        k.key.family() == family && k.alg.is_none_or(|a| a == header.alg)
    };
    let candidates: Vec<&super::layer::JwtKey> = match &header.kid {
        Some(kid) if keys.iter().any(|k| k.kid.is_some()) => {
            let c: Vec<_> = keys
                .iter()
                .filter(|k| k.kid.as_deref() == Some(kid.as_str()))
                .collect();
            if c.is_empty() {
                return Err(Invalid::UnknownKid);
            }
            c.into_iter().filter(usable).collect()
        }
        _ => keys.iter().filter(usable).collect(),
    };
    let mut v = Validation::new(header.alg);
    // Time, issuer and audience are checked below against `now` and the config.
    v.required_spec_claims.clear();
    v.validate_exp = false;
    v.validate_nbf = false;
    v.validate_aud = false;
    v.leeway = 0;
    let mut claims: Option<Map<String, Value>> = None;
    for k in candidates {
        if let Ok(t) = decode::<Map<String, Value>>(token, &k.key, &v) {
            claims = Some(t.claims);
            break;
        }
    }
    let claims = claims.ok_or(Invalid::Signature)?;
    let exp = num(claims.get("exp"))?.ok_or(Invalid::Malformed)?;
    if now > exp.saturating_add(*leeway) {
        return Err(Invalid::Expired);
    }
    if let Some(nbf) = num(claims.get("nbf"))?
        && nbf > now.saturating_add(*leeway)
    {
        return Err(Invalid::NotYetValid);
    }
    if let Some(iat) = num(claims.get("iat"))?
        && iat > now.saturating_add(*leeway)
    {
        return Err(Invalid::IssuedInFuture);
    }
    if let Some(iss) = issuer
        && claims.get("iss").and_then(Value::as_str) != Some(iss.as_str())
    {
        return Err(Invalid::Issuer);
    }
    if let Some(aud) = audience {
        let ok = match claims.get("aud") {
            Some(Value::String(s)) => s == aud,
            Some(Value::Array(a)) => a.iter().any(|x| x.as_str() == Some(aud.as_str())),
            _ => false,
        };
        if !ok {
            return Err(Invalid::Audience);
        }
    }
    let consumer = match claims.get("sub") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(Invalid::Subject),
    };
    let scopes = match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) => s.split_ascii_whitespace().map(String::from).collect(),
        (_, Some(Value::Array(a))) => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        (_, Some(Value::String(s))) => s.split_ascii_whitespace().map(String::from).collect(),
        _ => Vec::new(),
    };
    let claims = claims
        .into_iter()
        .filter_map(|(k, v)| match v {
            Value::String(s) => Some((k, s)),
            _ => None,
        })
        .collect();
    Ok(Verified {
        consumer,
        scopes,
        claims,
        expires: exp.saturating_add(*leeway),
    })
}

/// The consumer of an API key: its SHA-256 compared in constant time with *every*
/// consumer's digest (no early exit, so timing says nothing about which or how close).
pub(crate) fn verify_api_key(id: &IdentityPolicy, key: &[u8]) -> Option<Verified> {
    let Verifier::ApiKey { consumers, .. } = &*id.verifier else {
        return None;
    };
    let d: [u8; 32] = Sha256::digest(key).into();
    let mut found: Option<&super::layer::ApiConsumer> = None;
    for c in consumers {
        if bool::from(c.sha256.ct_eq(&d)) {
            found = Some(c);
        }
    }
    found.map(|c| Verified {
        consumer: c.consumer.clone(),
        scopes: c.scopes.clone(),
        claims: Vec::new(),
        expires: u64::MAX,
    })
}

struct Cache {
    map: HashMap<(u64, u128), Arc<Verified>>,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache { map: HashMap::new() });
}

fn token_hash(id: &IdentityPolicy, token: &str) -> u128 {
    let mut h = SipHasher24::new_with_keys(id.cache_key.0, id.cache_key.1);
    core::hash::Hasher::write(&mut h, token.as_bytes());
    h.finish128().as_u128()
}

/// A JWT through this thread's cache: a hit costs one keyed hash and a map lookup.
pub(crate) fn verify_cached(
    id: &IdentityPolicy,
    token: &str,
    now: u64,
) -> Result<Arc<Verified>, Invalid> {
    let key = (id.generation, token_hash(id, token));
    let hit = CACHE.with_borrow_mut(|c| match c.map.get(&key) {
        Some(v) if now <= v.expires => Some(v.clone()),
        Some(_) => {
            c.map.remove(&key);
            None
        }
        None => None,
    });
    if let Some(v) = hit {
        return Ok(v);
    }
    let v = Arc::new(verify_jwt(id, token, now)?);
    CACHE.with_borrow_mut(|c| {
        if c.map.len() >= CACHE_MAX {
            c.map.retain(|_, e| now <= e.expires);
        }
        if c.map.len() >= CACHE_MAX
            && let Some(k) = c.map.keys().next().copied()
        {
            c.map.remove(&k);
        }
        c.map.insert(key, v.clone());
    });
    Ok(v)
}

/// Entries in this thread's cache (tests).
#[cfg(test)]
pub(crate) fn cache_len() -> usize {
    CACHE.with_borrow(|c| c.map.len())
}

/// The `metrics` result label of an outcome.
pub(crate) fn result_label(o: Option<Outcome>) -> &'static str {
    match o {
        None => "ok",
        Some(Outcome::Unauthenticated) => "missing",
        Some(Outcome::InvalidToken) => "invalid_token",
        Some(Outcome::InvalidApiKey) => "invalid_api_key",
        Some(_) => "insufficient_scope",
    }
}

/// The step: the route's identity verifies the request's credential and the scopes are
/// checked. `Err` is the response's outcome and challenge.
pub(crate) fn authenticate(
    a: &AuthPolicy,
    headers: &dyn Headers,
    now: u64,
) -> Result<Arc<Verified>, Failure> {
    let id: &IdentityPolicy = &a.verifier;
    let v = match &*id.verifier {
        Verifier::Jwt { .. } => {
            let bearer = bearer_token(headers).filter(|t| !t.is_empty());
            let Some(token) = bearer else {
                return Err(Failure {
                    outcome: Outcome::Unauthenticated,
                    challenge: "Bearer".into(),
                });
            };
            verify_cached(id, token, now).map_err(|_| Failure {
                outcome: Outcome::InvalidToken,
                challenge: "Bearer error=\"invalid_token\"".into(),
            })?
        }
        Verifier::ApiKey { header, .. } => {
            let challenge = format!("ApiKey header=\"{header}\"");
            let key = headers.get(header).filter(|k| !k.is_empty());
            let Some(key) = key else {
                return Err(Failure {
                    outcome: Outcome::Unauthenticated,
                    challenge,
                });
            };
            Arc::new(verify_api_key(id, key).ok_or(Failure {
                outcome: Outcome::InvalidApiKey,
                challenge,
            })?)
        }
    };
    let missing: Vec<&str> = a
        .scopes
        .iter()
        .filter(|s| !v.scopes.contains(s))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        let scheme = match &*id.verifier {
            Verifier::Jwt { .. } => "Bearer".to_string(),
            Verifier::ApiKey { header, .. } => format!("ApiKey header=\"{header}\","),
        };
        return Err(Failure {
            outcome: Outcome::InsufficientScope,
            challenge: format!(
                "{scheme} error=\"insufficient_scope\", scope=\"{}\"",
                missing.join(" ")
            ),
        });
    }
    Ok(v)
}
