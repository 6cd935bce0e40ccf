//! weir-gateway's floors, checked: no import runs upward, no files import each other in a
//! circle (the rule and what counts as an import: the `weir-layers` crate's docs).
//!
//! Lowest first: the leaves (the owned-buffer connection, the process-wide stop, the admin
//! listener); the per-worker upstream pools (over the connection); one client connection
//! (`proxy.rs`: pools, stop, connection); the workers that run connections (`worker.rs`).
//! `main.rs` starts everything. State both a worker and a connection read (`Shared`) lives
//! in `shutdown.rs`, below both, so the two never import each other.

use std::path::Path;
use weir_layers::Floor;

const FLOORS: &[Floor] = &[
    Floor {
        name: "leaves",
        modules: &["admin", "io", "shutdown"],
        open: true,
    },
    Floor {
        name: "upstream pools",
        modules: &["upstream"],
        open: false,
    },
    Floor {
        name: "one connection",
        modules: &["proxy"],
        open: false,
    },
    Floor {
        name: "workers",
        modules: &["worker"],
        open: false,
    },
];

#[test]
fn imports_run_down_the_floors() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    weir_layers::check(&src, FLOORS, &[]);
}
