//! Quota-ledger recovery: any file bytes, and valid ledgers cut or with a byte flipped, are
//! recovered (a torn tail dropped) or refused at the damaged record — never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_policy::fuzz_ledger(data));
