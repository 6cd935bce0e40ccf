#![no_main]
libfuzzer_sys::fuzz_target!(
    |input: weir_fuzz::token_bucket::Input| weir_fuzz::token_bucket::check(input)
);
