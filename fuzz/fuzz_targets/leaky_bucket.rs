#![no_main]
libfuzzer_sys::fuzz_target!(
    |input: weir_fuzz::leaky_bucket::Input| weir_fuzz::leaky_bucket::check(input)
);
