//! weir's token bucket has zero error against the exact ideal GCRA on every trace of the
//! accuracy suite (and on a few other seeds), event by event.

use weir_bench::accuracy::{COLUMNS, SEED, run, traces};

#[test]
fn weir_column_has_zero_error() {
    let weir = COLUMNS.iter().position(|c| *c == "weir").unwrap();
    for seed in [SEED, 1, 2] {
        for tr in traces(seed) {
            let res = run(&tr);
            let ideal = res[0].unwrap();
            let w = res[weir].unwrap();
            assert_eq!(w.disagreements, 0, "seed {seed}, trace {}", tr.name);
            assert_eq!(w.admitted, ideal.admitted, "seed {seed}, trace {}", tr.name);
        }
    }
}

#[test]
fn published_table_matches_docs() {
    let doc = include_str!("../../docs/ACCURACY.md");
    let table = weir_bench::accuracy::markdown(SEED);
    assert!(
        doc.contains(table.trim()),
        "docs/ACCURACY.md is stale: regenerate it with \
         `cargo run --release -p weir-bench --bin accuracy`"
    );
}
