//! Token parsing: arbitrary bytes as a bearer token (header, claims, signature), a JWKS
//! document or an API-key file are verified or refused — never a panic, never a forgery.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_policy::fuzz_token(data));
