//! The Python glue's floors, checked: no import runs upward, no files import each other in
//! a circle (the rule and what counts as an import: the `weir-layers` crate's docs).
//!
//! Lowest first: the leaves (time conversion, exceptions, the `Decision` class); the replay
//! step a limiter class implements (`fill.rs`); the classes, independent of each other;
//! `weir.replay` itself, which dispatches over the limiter classes. `lib.rs` registers
//! everything. The step lives below both the classes and `replay.rs`, so the two never
//! import each other.

use weir_layers::Floor;

const FLOORS: &[Floor] = &[
    Floor::open("leaves", &["decision", "errors", "time"]),
    Floor::closed("replay step", &["fill"]),
    Floor::closed(
        "classes",
        &["limiters", "quota", "resilience", "simulation"],
    ),
    Floor::closed("replay", &["replay"]),
];

#[test]
fn imports_run_down_the_floors() {
    weir_layers::check_crate(env!("CARGO_MANIFEST_DIR"), FLOORS, &[]);
}
