//! Config history: the last [`KEPT`] good revisions with the text each was compiled from,
//! so `POST /admin/rollback` can make one live again (docs/HTTP.md, "Config history and
//! rollback").
//!
//! The text is kept, not the compiled set: a rollback compiles it again, so files it
//! refers to (keys, lists) are read as they are now, and one that no longer parses fails
//! the rollback like a bad reload, leaving the live config alone.

use crate::accesslog::rfc3339_ms;
use crate::check::ConfigError;
use std::collections::VecDeque;
use std::sync::Arc;

/// How many good revisions are remembered (rollbacks included).
pub(crate) const KEPT: usize = 10;

/// One good revision.
pub(crate) struct Entry {
    pub revision: u64,
    /// Wall time of the load, RFC 3339 with milliseconds.
    pub loaded_at: String,
    /// Hex SHA-256 of the config text's bytes.
    pub sha256: String,
    pub text: Arc<str>,
    /// The name errors use (the file's path).
    pub origin: Arc<str>,
}

/// The remembered revisions, oldest first.
#[derive(Default)]
pub(crate) struct History(VecDeque<Entry>);

impl History {
    /// Records revision `revision`, compiled from `text`, dropping the oldest past [`KEPT`].
    pub(crate) fn push(&mut self, revision: u64, text: &str, origin: &str, unix_ms: u64) {
        if self.0.len() == KEPT {
            self.0.pop_front();
        }
        let digest = crate::check::sha256(text.as_bytes());
        let sha256 = digest.iter().fold(String::with_capacity(64), |mut s, b| {
            use core::fmt::Write;
            let _ = write!(s, "{b:02x}");
            s
        });
        self.0.push_back(Entry {
            revision,
            loaded_at: rfc3339_ms(unix_ms),
            sha256,
            text: text.into(),
            origin: origin.into(),
        });
    }

    /// The text and origin of a remembered revision.
    pub(crate) fn find(&self, revision: u64) -> Option<(Arc<str>, Arc<str>)> {
        self.0
            .iter()
            .find(|e| e.revision == revision)
            .map(|e| (e.text.clone(), e.origin.clone()))
    }

    /// `[{"revision", "loaded_at", "sha256"}]`, oldest first (never the text: it may
    /// name secrets' files and is not the admin API's to print).
    pub(crate) fn json(&self) -> serde_json::Value {
        self.0
            .iter()
            .map(|e| {
                serde_json::json!({
                    "revision": e.revision,
                    "loaded_at": e.loaded_at,
                    "sha256": e.sha256,
                })
            })
            .collect()
    }
}

/// Why a rollback did not happen.
#[derive(Debug)]
pub enum RollbackError {
    /// No such revision among the remembered ones.
    Unknown(u64),
    /// The revision's text no longer compiles (e.g. a file it refers to changed).
    Config(ConfigError),
}

impl core::fmt::Display for RollbackError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RollbackError::Unknown(r) => write!(
                f,
                "revision {r} is not in the config history (the last {KEPT} good revisions)"
            ),
            RollbackError::Config(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RollbackError {}

#[cfg(test)]
mod tests {
    use crate::engine::history::History;

    #[test]
    fn keeps_the_last_ten_with_digests() {
        let mut h = History::default();
        for r in 1..=12 {
            h.push(r, &format!("text {r}"), "f.toml", 1_714_564_800_000);
        }
        let v = h.json();
        let revs: Vec<u64> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["revision"].as_u64().unwrap())
            .collect();
        assert_eq!(revs, (3..=12).collect::<Vec<_>>());
        assert!(h.find(2).is_none());
        assert_eq!(&*h.find(12).unwrap().0, "text 12");
        // sha256("text 12"), as `printf 'text 12' | sha256sum` prints it.
        let want = crate::check::sha256(b"text 12");
        let hex = v[9]["sha256"].as_str().unwrap();
        assert_eq!(hex.len(), 64);
        assert!(
            want.iter()
                .enumerate()
                .all(|(i, b)| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16) == Ok(*b))
        );
    }
}
