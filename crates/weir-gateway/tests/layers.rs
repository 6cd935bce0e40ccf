//! weir-gateway's floors, checked: no import runs upward, no files import each other in a
//! circle (the rule and what counts as an import: the `weir-layers` crate's docs).
//!
//! Lowest first: the leaves (the owned-buffer connection, the process-wide stop, the admin
//! listener); the per-worker upstream pools (over the connection); one client connection
//! (`proxy.rs`: pools, stop, connection); the workers that run connections (`worker.rs`).
//! `main.rs` starts everything. State both a worker and a connection read (`Shared`) lives
//! in `shutdown.rs`, below both, so the two never import each other.

use weir_layers::Floor;

const FLOORS: &[Floor] = &[
    Floor::open("leaves", &["admin", "io", "shutdown"]),
    Floor::closed("upstream pools", &["upstream"]),
    Floor::closed("one connection", &["proxy"]),
    Floor::closed("workers", &["worker"]),
];

#[test]
fn imports_run_down_the_floors() {
    weir_layers::check_crate(env!("CARGO_MANIFEST_DIR"), FLOORS, &[]);
}
