//! Helpers shared by the engine-level test files.

use std::path::PathBuf;

use tempfile::TempDir;

/// A fresh directory for one test (`weir-TAG-*` in the temp dir, removed when the guard is
/// dropped) and, in it, the path of an access log that does not exist yet.
pub(crate) fn scratch_log(tag: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("weir-{tag}-"))
        .tempdir()
        .unwrap();
    let log = dir.path().join("access.log");
    (dir, log)
}
