//! Helpers shared by the engine-level test files.

use std::path::PathBuf;

/// A fresh directory for one test (named by `tag` and this process) and, in it, the path
/// of an access log that does not exist yet.
pub(crate) fn scratch_log(tag: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("weir-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let _ = std::fs::remove_file(&log);
    (dir, log)
}
