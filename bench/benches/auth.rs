//! The identity step's cost per request: a full JWT verification (signature, claims) per
//! algorithm, against a hit in the per-thread verified-token cache, and the whole auth step
//! of a route (header lookup, cache, scopes) for a JWT and for an API key.
//!
//! Tokens are signed here with the test-only keys of `crates/weir-policy/testdata` (RS256
//! 2048-bit, ES256 P-256, EdDSA Ed25519) or an HS256 secret.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use std::hint::black_box;
use weir_policy::config::writer::{ConfigText, JwtKeys};
use weir_policy::{__bench_authenticate, __bench_verify, __set_test_env, PolicySet, config};

fn testdata(name: &str) -> String {
    format!(
        "{}/../crates/weir-policy/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The identity `id` written by `identity`, guarding one route (scope `read`).
fn set(identity: impl FnOnce(ConfigText) -> ConfigText) -> PolicySet {
    let text = identity(ConfigText::new())
        .upstream("u", "127.0.0.1:1")
        .route("r", "/", "u")
        .auth("id", &["read"])
        .render();
    config::parse(&text, "bench.toml").expect("bench config")
}

/// A JWT identity `id` (issuer `bench`, audience `weir`) with keys from `keys`.
fn jwt(c: ConfigText, keys: JwtKeys<'_>) -> ConfigText {
    c.jwt("id", keys)
        .set("issuer", "bench")
        .set("audience", "weir")
}

fn jwt_set(algs: &[&str]) -> PolicySet {
    let jwks = testdata("test-only.jwks.json");
    set(|c| jwt(c, JwtKeys::Jwks(&jwks)).set("algorithms", algs))
}

fn token(alg: Algorithm, key: &EncodingKey, kid: Option<&str>) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let mut h = Header::new(alg);
    h.kid = kid.map(str::to_string);
    let claims = serde_json::json!({
        "sub": "consumer-42", "iss": "bench", "aud": "weir", "exp": now + 3600,
        "iat": now, "scope": "read write", "tenant": "acme",
    });
    encode(&h, &claims, key).expect("sign")
}

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(testdata(name)).expect("test key")
}

fn auth(c: &mut Criterion) {
    let mut g = c.benchmark_group("auth");
    g.throughput(Throughput::Elements(1));
    let asym = jwt_set(&["RS256", "ES256", "EdDSA"]);
    let rows = [
        (
            "RS256",
            token(
                Algorithm::RS256,
                &EncodingKey::from_rsa_pem(&pem("test-only-rsa-a.key.pem")).expect("rsa"),
                Some("rsa-a"),
            ),
        ),
        (
            "ES256",
            token(
                Algorithm::ES256,
                &EncodingKey::from_ec_pem(&pem("test-only-ec.key.pem")).expect("ec"),
                Some("ec-1"),
            ),
        ),
        (
            "EdDSA",
            token(
                Algorithm::EdDSA,
                &EncodingKey::from_ed_pem(&pem("test-only-ed.key.pem")).expect("ed"),
                Some("ed-1"),
            ),
        ),
    ];
    for (name, t) in &rows {
        assert!(__bench_verify(&asym, t, false), "{name} verifies");
        g.bench_function(format!("verify_{name}"), |b| {
            b.iter(|| black_box(__bench_verify(&asym, black_box(t), false)))
        });
        g.bench_function(format!("cache_hit_{name}"), |b| {
            b.iter(|| black_box(__bench_verify(&asym, black_box(t), true)))
        });
    }
    __set_test_env("WEIR_BENCH_HS256", "bench-secret-not-for-use");
    let hs = set(|c| jwt(c, JwtKeys::SecretEnv("WEIR_BENCH_HS256")));
    let ht = token(
        Algorithm::HS256,
        &EncodingKey::from_secret(b"bench-secret-not-for-use").expect("hs"),
        None,
    );
    assert!(__bench_verify(&hs, &ht, false));
    g.bench_function("verify_HS256", |b| {
        b.iter(|| black_box(__bench_verify(&hs, black_box(&ht), false)))
    });
    g.bench_function("cache_hit_HS256", |b| {
        b.iter(|| black_box(__bench_verify(&hs, black_box(&ht), true)))
    });
    // The route's whole step: Authorization lookup, cache hit, scope check.
    let bearer = format!("Bearer {}", rows[0].1);
    let headers = [("authorization", bearer.as_str()), ("accept", "*/*")];
    assert!(__bench_authenticate(&asym, &headers));
    g.bench_function("step_jwt_cached", |b| {
        b.iter(|| black_box(__bench_authenticate(&asym, black_box(&headers))))
    });
    // API keys: SHA-256 and a constant-time pass over 100 consumers' digests.
    let dir = std::env::temp_dir().join(format!("weir-bench-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("keys.toml");
    let mut text = String::new();
    for i in 0..100 {
        use std::fmt::Write;
        let d = sha_hex(&format!("key-{i}"));
        let _ = write!(
            text,
            "[[keys]]\nconsumer = \"c{i}\"\nsha256 = \"{d}\"\nscopes = [\"read\"]\n"
        );
    }
    std::fs::write(&file, text).expect("write keys");
    let keys = file.display().to_string();
    let api = set(|c| c.api_keys("id", &keys));
    let headers = [("x-api-key", "key-57")];
    assert!(__bench_authenticate(&api, &headers));
    g.bench_function("step_api_key_100_consumers", |b| {
        b.iter(|| black_box(__bench_authenticate(&api, black_box(&headers))))
    });
    let _ = std::fs::remove_dir_all(dir);
    g.finish();
}

/// SHA-256 in hex with `openssl` semantics, through the crate jsonwebtoken already uses.
fn sha_hex(s: &str) -> String {
    use std::fmt::Write;
    let d = <sha2::Sha256 as sha2::Digest>::digest(s.as_bytes());
    d.iter().fold(String::new(), |mut o, b| {
        let _ = write!(o, "{b:02x}");
        o
    })
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(30);
    targets = auth
}
criterion_main!(benches);
