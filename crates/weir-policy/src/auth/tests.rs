//! Identity tests: tokens signed in the tests with the test-only keys under `testdata/`
//! (RSA, P-256, Ed25519) or an HS256 secret from an environment variable.

use super::layer::IdentityPolicy;
use super::service::{Invalid, authenticate, cache_len, verify_api_key, verify_cached, verify_jwt};
use crate::config;
use crate::config::writer::{ConfigText, JwtKeys, Value as Toml};
use crate::outcome::Outcome;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};
use std::sync::Arc;

const NOW: u64 = 1_800_000_000;

fn testdata(name: &str) -> String {
    format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(testdata(name)).unwrap()
}

fn key(alg: Algorithm) -> EncodingKey {
    match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem("test-only-rsa-a.key.pem")).unwrap(),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem("test-only-ec.key.pem")).unwrap(),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&pem("test-only-ed.key.pem")).unwrap(),
        _ => unreachable!(),
    }
}

fn kid_of(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::RS256 => "rsa-a",
        Algorithm::ES256 => "ec-1",
        _ => "ed-1",
    }
}

fn claims() -> Value {
    json!({
        "sub": "alice",
        "iss": "https://issuer.example.test",
        "aud": ["other", "weir-api"],
        "exp": NOW + 600,
        "iat": NOW - 10,
        "scope": "read write",
        "tenant": "acme",
    })
}

fn sign(alg: Algorithm, kid: Option<&str>, c: &Value) -> String {
    let mut h = Header::new(alg);
    h.kid = kid.map(str::to_string);
    encode(&h, c, &key(alg)).unwrap()
}

fn config_text(jwks: &str, algs: &str) -> String {
    ConfigText::new()
        .log("off")
        .jwt("users", JwtKeys::Jwks(jwks))
        .set("algorithms", Toml::Raw(algs))
        .set("issuer", "https://issuer.example.test")
        .set("audience", "weir-api")
        .set("leeway", "30s")
        .upstream("u", "127.0.0.1:1")
        .route("r", "/", "u")
        .auth("users", &["read"])
        .render()
}

fn identity(jwks: &str, algs: &str) -> Arc<IdentityPolicy> {
    let set = config::parse(&config_text(&testdata(jwks), algs), "t.toml").unwrap();
    set.identities[0].clone()
}

fn all() -> Arc<IdentityPolicy> {
    identity("test-only.jwks.json", r#"["RS256", "ES256", "EdDSA"]"#)
}

#[test]
fn valid_tokens_of_every_algorithm() {
    let id = all();
    for alg in [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA] {
        for kid in [Some(kid_of(alg)), None] {
            let t = sign(alg, kid, &claims());
            let v = verify_jwt(&id, &t, NOW).unwrap_or_else(|e| panic!("{alg:?} {kid:?}: {e:?}"));
            assert_eq!(v.consumer, "alice");
            assert_eq!(v.claim("tenant"), Some("acme"));
            assert_eq!(v.claim("exp"), None);
        }
    }
}

#[test]
fn each_invalid_kind() {
    let id = all();
    let good = sign(Algorithm::RS256, Some("rsa-a"), &claims());
    // Bad signature: the last signature character changed.
    let mut bad = good.clone().into_bytes();
    let last = bad.len() - 2;
    bad[last] = if bad[last] == b'A' { b'B' } else { b'A' };
    let bad = String::from_utf8(bad).unwrap();
    assert_eq!(verify_jwt(&id, &bad, NOW), Err(Invalid::Signature));
    // The claims of one token with the signature of another.
    let mut other = claims();
    other["sub"] = "mallory".into();
    let o = sign(Algorithm::RS256, Some("rsa-a"), &other);
    let spliced = format!(
        "{}.{}",
        o.rsplit_once('.').unwrap().0,
        good.rsplit_once('.').unwrap().1
    );
    assert_eq!(verify_jwt(&id, &spliced, NOW), Err(Invalid::Signature));
    // Signed with a key that is a different one of the same kid.
    let b = EncodingKey::from_rsa_pem(&pem("test-only-rsa-b.key.pem")).unwrap();
    let mut h = Header::new(Algorithm::RS256);
    h.kid = Some("rsa-a".into());
    let wrong_key = encode(&h, &claims(), &b).unwrap();
    assert_eq!(verify_jwt(&id, &wrong_key, NOW), Err(Invalid::Signature));
    // Unknown kid.
    let t = sign(Algorithm::RS256, Some("nope"), &claims());
    assert_eq!(verify_jwt(&id, &t, NOW), Err(Invalid::UnknownKid));
    // Algorithm not allowed: HS256 (the classic confusion with a public key as secret).
    let hs = encode(
        &Header::new(Algorithm::HS256),
        &claims(),
        &EncodingKey::from_secret(b"k").unwrap(),
    )
    .unwrap();
    assert_eq!(verify_jwt(&id, &hs, NOW), Err(Invalid::Algorithm));
    let rs_only = identity("test-only.jwks.json", r#"["RS256"]"#);
    let es = sign(Algorithm::ES256, Some("ec-1"), &claims());
    assert_eq!(verify_jwt(&rs_only, &es, NOW), Err(Invalid::Algorithm));
    // alg none.
    let none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(claims().to_string().as_bytes())
    );
    assert_eq!(verify_jwt(&id, &none, NOW), Err(Invalid::Malformed));
    // Malformed.
    for m in ["", "a", "a.b", "a.b.c", "....", "eyJ.eyJ.x"] {
        assert_eq!(verify_jwt(&id, m, NOW), Err(Invalid::Malformed), "{m:?}");
    }
    // Claims.
    let with = |k: &str, v: Value| {
        let mut c = claims();
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v;
        }
        sign(Algorithm::ES256, None, &c)
    };
    let cases = [
        ("iss", json!("https://evil.example.test"), Invalid::Issuer),
        ("iss", Value::Null, Invalid::Issuer),
        ("aud", json!("other"), Invalid::Audience),
        ("aud", Value::Null, Invalid::Audience),
        ("exp", json!(NOW - 31), Invalid::Expired),
        ("exp", Value::Null, Invalid::Malformed),
        ("exp", json!("soon"), Invalid::Malformed),
        ("nbf", json!(NOW + 31), Invalid::NotYetValid),
        ("iat", json!(NOW + 31), Invalid::IssuedInFuture),
        ("sub", Value::Null, Invalid::Subject),
        ("sub", json!(""), Invalid::Subject),
    ];
    for (k, v, want) in cases {
        assert_eq!(
            verify_jwt(&id, &with(k, v.clone()), NOW),
            Err(want),
            "{k}={v}"
        );
    }
    assert!(verify_jwt(&id, &with("aud", json!("weir-api")), NOW).is_ok());
}

fn b64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..=c.len() {
            out.push(char::from(T[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

#[test]
fn leeway_edges() {
    let id = all();
    let t = |k: &str, v: u64| {
        let mut c = claims();
        c[k] = v.into();
        sign(Algorithm::EdDSA, None, &c)
    };
    // exp: valid up to exp + leeway inclusive.
    assert!(verify_jwt(&id, &t("exp", NOW - 30), NOW).is_ok());
    assert_eq!(
        verify_jwt(&id, &t("exp", NOW - 31), NOW),
        Err(Invalid::Expired)
    );
    // nbf / iat: valid up to now + leeway inclusive.
    assert!(verify_jwt(&id, &t("nbf", NOW + 30), NOW).is_ok());
    assert_eq!(
        verify_jwt(&id, &t("nbf", NOW + 31), NOW),
        Err(Invalid::NotYetValid)
    );
    assert!(verify_jwt(&id, &t("iat", NOW + 30), NOW).is_ok());
    assert_eq!(
        verify_jwt(&id, &t("iat", NOW + 31), NOW),
        Err(Invalid::IssuedInFuture)
    );
}

#[test]
fn kid_rotation() {
    // Old key set: rsa-a only; new set: rsa-b only. Tokens follow their keys.
    let a = identity("test-only-rsa-a.jwks.json", r#"["RS256"]"#);
    let b = identity("test-only-rsa-b.jwks.json", r#"["RS256"]"#);
    let ka = EncodingKey::from_rsa_pem(&pem("test-only-rsa-a.key.pem")).unwrap();
    let kb = EncodingKey::from_rsa_pem(&pem("test-only-rsa-b.key.pem")).unwrap();
    let mk = |kid: &str, k: &EncodingKey| {
        let mut h = Header::new(Algorithm::RS256);
        h.kid = Some(kid.into());
        encode(&h, &claims(), k).unwrap()
    };
    let ta = mk("rsa-a", &ka);
    let tb = mk("rsa-b", &kb);
    assert!(verify_jwt(&a, &ta, NOW).is_ok());
    assert_eq!(verify_jwt(&a, &tb, NOW), Err(Invalid::UnknownKid));
    assert!(verify_jwt(&b, &tb, NOW).is_ok());
    assert_eq!(verify_jwt(&b, &ta, NOW), Err(Invalid::UnknownKid));
    // During the overlap (both keys published) both verify, each with its own key.
    let both = all();
    assert!(verify_jwt(&both, &ta, NOW).is_ok());
    assert!(verify_jwt(&both, &mk("rsa-b", &kb), NOW).is_ok());
    // A kid naming the other key with this key's signature fails.
    assert_eq!(
        verify_jwt(&both, &mk("rsa-b", &ka), NOW),
        Err(Invalid::Signature)
    );
}

#[test]
fn cache_hits_expire_and_never_cache_failures() {
    let id = all();
    let t = sign(Algorithm::ES256, None, &claims());
    let before = cache_len();
    assert!(verify_cached(&id, &t, NOW).is_ok());
    assert_eq!(cache_len(), before + 1);
    assert!(verify_cached(&id, &t, NOW).is_ok());
    assert_eq!(cache_len(), before + 1);
    // After exp + leeway the cached entry no longer holds.
    assert_eq!(
        verify_cached(&id, &t, NOW + 600 + 31).err(),
        Some(Invalid::Expired)
    );
    let n = cache_len();
    assert!(verify_cached(&id, "not.a.token", NOW).is_err());
    assert_eq!(cache_len(), n);
    // A recompiled identity (reload) has a new generation: no hit on the old entry.
    let again = all();
    assert_ne!(again.generation, id.generation);
}

fn route_auth(set: &crate::PolicySet) -> &super::AuthPolicy {
    set.routes[0].auth.as_ref().unwrap()
}

#[test]
fn authenticate_outcomes_and_challenges() {
    let set = config::parse(
        &config_text(&testdata("test-only.jwks.json"), r#"["ES256"]"#),
        "t.toml",
    )
    .unwrap();
    let a = route_auth(&set);
    let t = sign(Algorithm::ES256, None, &claims());
    let bearer = format!("Bearer {t}");
    let now = super::service::unix_now();
    let mut c = claims();
    c["exp"] = (now + 600).into();
    c["iat"] = now.into();
    let live = sign(Algorithm::ES256, None, &c);
    let ok = format!("bearer {live}");
    assert_eq!(
        authenticate(a, &[("authorization", ok.as_str())], now)
            .unwrap()
            .consumer,
        "alice"
    );
    let f = authenticate(a, &(), now).unwrap_err();
    assert_eq!(
        (f.outcome, f.challenge.as_str()),
        (Outcome::Unauthenticated, "Bearer")
    );
    let f = authenticate(a, &[("authorization", "Basic abc")], now).unwrap_err();
    assert_eq!(f.outcome, Outcome::Unauthenticated);
    let f = authenticate(a, &[("authorization", bearer.as_str())], NOW + 10_000).unwrap_err();
    assert_eq!(
        (f.outcome, f.challenge.as_str()),
        (Outcome::InvalidToken, "Bearer error=\"invalid_token\"")
    );
    assert!(!f.challenge.contains(&t));
    // Scope missing.
    let mut c2 = c.clone();
    c2["scope"] = "write".into();
    let t2 = format!("Bearer {}", sign(Algorithm::ES256, None, &c2));
    let f = authenticate(a, &[("authorization", t2.as_str())], now).unwrap_err();
    assert_eq!(
        (f.outcome, f.challenge.as_str()),
        (
            Outcome::InsufficientScope,
            "Bearer error=\"insufficient_scope\", scope=\"read\""
        )
    );
    // `scp` as a list counts too.
    let mut c3 = c.clone();
    c3.as_object_mut().unwrap().remove("scope");
    c3["scp"] = json!(["read"]);
    let t3 = format!("Bearer {}", sign(Algorithm::ES256, None, &c3));
    assert!(authenticate(a, &[("authorization", t3.as_str())], now).is_ok());
}

#[test]
fn hs256_from_the_environment() {
    crate::__set_test_env("WEIR_TEST_AUTH_HS_SECRET", "s3cret-for-tests-only");
    let text = ConfigText::new()
        .jwt("svc", JwtKeys::SecretEnv("WEIR_TEST_AUTH_HS_SECRET"))
        .upstream("u", "127.0.0.1:1")
        .render();
    let set = config::parse(&text, "t.toml").unwrap();
    let id = &set.identities[0];
    let k = EncodingKey::from_secret(b"s3cret-for-tests-only").unwrap();
    let t = encode(&Header::new(Algorithm::HS256), &claims(), &k).unwrap();
    assert!(verify_jwt(id, &t, NOW).is_ok());
    let wrong = EncodingKey::from_secret(b"other").unwrap();
    let t = encode(&Header::new(Algorithm::HS256), &claims(), &wrong).unwrap();
    assert_eq!(verify_jwt(id, &t, NOW), Err(Invalid::Signature));
    let t = sign(Algorithm::RS256, None, &claims());
    assert_eq!(verify_jwt(id, &t, NOW), Err(Invalid::Algorithm));
    // The secret never shows in /admin/config.
    let shown = serde_json::to_string(&set).unwrap();
    assert!(!shown.contains("s3cret"));
    assert!(shown.contains("WEIR_TEST_AUTH_HS_SECRET"));
}

#[test]
fn api_keys() {
    use sha2::Digest;
    let dir = std::env::temp_dir().join(format!("weir-apikeys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = |k: &str| {
        sha2::Sha256::digest(k.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let file = dir.join("keys.toml");
    std::fs::write(
        &file,
        format!(
            "[[keys]]\nconsumer = \"team-a\"\nsha256 = \"{}\"\n[[keys]]\nconsumer = \"team-b\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n",
            d("key-a"),
            d("key-b")
        ),
    )
    .unwrap();
    let text = ConfigText::new()
        .api_keys("keys", &file.display().to_string())
        .upstream("u", "127.0.0.1:1")
        .route("r", "/", "u")
        .auth("keys", &["read"])
        .render();
    let set = config::parse(&text, "t.toml").unwrap();
    let id = &set.identities[0];
    assert_eq!(verify_api_key(id, b"key-a").unwrap().consumer, "team-a");
    assert_eq!(verify_api_key(id, b"key-b").unwrap().consumer, "team-b");
    assert!(verify_api_key(id, b"key-c").is_none());
    assert!(verify_api_key(id, b"").is_none());
    let a = route_auth(&set);
    let f = authenticate(a, &(), 0).unwrap_err();
    assert_eq!(f.outcome, Outcome::Unauthenticated);
    let f = authenticate(a, &[("x-api-key", "nope")], 0).unwrap_err();
    assert_eq!(f.outcome, Outcome::InvalidApiKey);
    let f = authenticate(a, &[("x-api-key", "key-a")], 0).unwrap_err();
    assert_eq!(f.outcome, Outcome::InsufficientScope);
    assert_eq!(
        authenticate(a, &[("X-Api-Key", "key-b")], 0)
            .unwrap()
            .consumer,
        "team-b"
    );
    // A key file that does not parse is a config error naming the key.
    std::fs::write(&file, "[[keys]]\nconsumer = \"x\"\nsha256 = \"zz\"\n").unwrap();
    let e = config::parse(&text, "t.toml").unwrap_err().to_string();
    assert!(
        e.starts_with("t.toml:5: identities[0].keys: cannot parse"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_errors_name_file_line_and_key() {
    let base = config_text(&testdata("test-only.jwks.json"), r#"["RS256"]"#);
    // (text replaced, its replacement, what the error names)
    let cases = [
        (
            r#"identity = "users""#,
            r#"identity = "nobody""#,
            "routes[0].auth.identity: unknown identity",
        ),
        (
            r#"["RS256"]"#,
            r#"["none"]"#,
            "identities[0].algorithms[0]: unknown algorithm",
        ),
        (
            r#"["RS256"]"#,
            r#"["HS256"]"#,
            "identities[0].algorithms[0]: HS256 needs secret_env",
        ),
        (
            "test-only.jwks.json",
            "missing.jwks.json",
            "identities[0].jwks: cannot read",
        ),
        (
            "test-only.jwks.json",
            "test-only-rsa-a.key.pem",
            "identities[0].jwks: cannot parse",
        ),
        (
            r#"scopes = ["read"]"#,
            r#"forward = "authorization""#,
            "routes[0].auth.forward",
        ),
        (
            r#"kind = "jwt""#,
            "kind = \"jwt\"\n        header = \"x\"",
            "identities[0].header: not used",
        ),
    ];
    for (from, to, want) in cases {
        let e = config::parse(&base.replace(from, to), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.toml:"), "{e}");
        assert!(e.contains(want), "{e} !~ {want}");
    }
}

#[test]
fn consumer_and_claim_key_parts_need_auth() {
    for part in ["consumer", "claim:tenant"] {
        let text = ConfigText::new()
            .upstream("u", "127.0.0.1:1")
            .route("r", "/", "u")
            .rate_limit("fixed_window")
            .set("limit", 1)
            .set("window", "1s")
            .set("key", &["route", part])
            .render();
        let e = config::parse(&text, "t.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("t.toml:13: routes[0].rate_limit.key[1]: key part"),
            "{e}"
        );
    }
    let base = config_text(&testdata("test-only.jwks.json"), r#"["RS256"]"#);
    let ok = format!(
        "{base}\n[routes.rate_limit]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1s\"\nkey = [\"consumer\", \"claim:tenant\"]\n"
    );
    let set = config::parse(&ok, "t.toml").unwrap();
    assert!(set.describe().contains("key [consumer, claim:tenant]"));
    assert!(set.describe().contains("identity users: jwt, 2 key(s)"));
}

#[test]
fn fuzz_entry_never_panics_on_seeds_and_mutations() {
    let good = sign(Algorithm::RS256, Some("rsa-a"), &claims());
    let jwks = std::fs::read_to_string(testdata("test-only.jwks.json")).unwrap();
    let mut inputs: Vec<Vec<u8>> = vec![
        good.clone().into_bytes(),
        jwks.into_bytes(),
        b"".to_vec(),
        b"..".to_vec(),
        b"eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.".to_vec(),
        b"[[keys]]\nconsumer = \"a\"\nsha256 = \"00\"\n".to_vec(),
    ];
    // Truncations and byte flips of a real token.
    for i in (0..good.len()).step_by(7) {
        inputs.push(good.as_bytes()[..i].to_vec());
        let mut m = good.clone().into_bytes();
        m[i] ^= 0x20;
        inputs.push(m);
    }
    for i in inputs {
        crate::fuzz_token(&i);
    }
}
