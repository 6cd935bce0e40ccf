//! The Python glue's floors, checked: no import runs upward, no files import each other in
//! a circle (the rule and what counts as an import: the `weir-layers` crate's docs).
//!
//! Lowest first: the leaves (time conversion, exceptions, the `Decision` class); the replay
//! step a limiter class implements (`fill.rs`); the classes, independent of each other;
//! `weir.replay` itself, which dispatches over the limiter classes. `lib.rs` registers
//! everything. The step lives below both the classes and `replay.rs`, so the two never
//! import each other.

use std::path::Path;
use weir_layers::Floor;

const FLOORS: &[Floor] = &[
    Floor {
        name: "leaves",
        modules: &["decision", "errors", "time"],
        open: true,
    },
    Floor {
        name: "replay step",
        modules: &["fill"],
        open: false,
    },
    Floor {
        name: "classes",
        modules: &["limiters", "quota", "resilience", "simulation"],
        open: false,
    },
    Floor {
        name: "replay",
        modules: &["replay"],
        open: false,
    },
];

#[test]
fn imports_run_down_the_floors() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    weir_layers::check(&src, FLOORS, &[]);
}
