//! The TOML config: arbitrary text yields a policy set or an error naming file:line — never
//! a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_policy::fuzz_config(data));
