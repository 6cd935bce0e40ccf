//! weir-policy's floors, checked: no import runs upward, no files import each other in a
//! circle (the rule and what counts as an import: the `weir-layers` crate's docs).
//!
//! The floors follow `src/lib.rs`: leaves; auth (identity feeds the rate limit's key);
//! the policies, one folder each and independent of each other; then the compiled set
//! (`policy.rs`), the file compiler (`config/`), the runtime, one request (`flow.rs`) and the
//! engine, each above the ones before. When a lower module needs a type
//! a higher one defines, the type moves down (e.g. `AccessLogTarget` lives in
//! `accesslog.rs`, `policy.rs` re-exports it). Run
//! `cargo test -p weir-policy --test layers -- --nocapture` to see every import.

use std::path::Path;
use weir_layers::{Allowed, Floor};

const FLOORS: &[Floor] = &[
    Floor::open(
        "leaves",
        &[
            "accesslog",
            "attempt",
            "check",
            "clientaddr",
            "descriptor",
            "dur",
            "metrics",
            "outcome",
            "response",
            "secret",
            "step",
            "store",
            "text",
            "timer",
            "wall",
        ],
    ),
    Floor::closed("identity", &["auth"]),
    Floor::closed(
        "policies",
        &[
            "breaker",
            "concurrency",
            "quota",
            "ratelimit",
            "retry",
            "upstream",
        ],
    ),
    Floor::closed("compiled set", &["policy"]),
    Floor::closed("file compiler", &["config"]),
    Floor::closed("runtime", &["runtime"]),
    Floor::closed("one request", &["flow"]),
    Floor::closed("engine", &["engine"]),
];

/// Upward imports still to be undone: each reason says what should change. An entry that
/// no longer happens fails the test, so the list only shrinks.
const ALLOWED: &[Allowed] = &[
    Allowed {
        from: "quota/service.rs",
        to: "policy.rs",
        why: "open_ledgers takes the whole PolicySet: give it the quota settings and the \
              routes' quota policies instead",
    },
    Allowed {
        from: "quota/admin.rs",
        to: "runtime.rs",
        why: "the quota admin handlers read the runtime's Live: give them the routes' \
              ledgers (or move the handlers under engine/, beside the admin API that calls them)",
    },
];

#[test]
fn imports_run_down_the_floors() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for i in weir_layers::imports(&src) {
        println!("{}:{} -> {}", i.file, i.line, i.to);
    }
    weir_layers::check(&src, FLOORS, ALLOWED);
}
