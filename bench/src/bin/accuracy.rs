//! Prints the accuracy table (markdown) of weir and its peers against the exact ideal.
//!
//! `cargo run --release -p weir-bench --bin accuracy [SEED]` (default: the published seed).

fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(weir_bench::accuracy::SEED);
    print!("{}", weir_bench::accuracy::markdown(seed));
}
