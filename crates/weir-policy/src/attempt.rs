//! What an upstream attempt produced, and the lists (`retry.on`, `breaker.failure_on`)
//! that name such results.

use serde::Serialize;

/// What an attempt produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    /// The response head arrived with this status.
    Response {
        /// Status as received.
        status: u16,
    },
    /// The connection could not be made (refused, connect timeout).
    ConnectFailure,
    /// The connection was reset / closed before a response head.
    Reset,
    /// The upstream answered something that is not valid HTTP.
    ProtocolError,
    /// No response head within `per_try_timeout`.
    PerTryTimeout,
}

impl AttemptResult {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            AttemptResult::Response { status } if *status >= 500 => "http_5xx",
            AttemptResult::Response { .. } => "success",
            AttemptResult::ConnectFailure => "connect_failure",
            AttemptResult::Reset => "reset",
            AttemptResult::ProtocolError => "protocol_error",
            AttemptResult::PerTryTimeout => "timeout",
        }
    }
}

/// Attempt results a list like `on` / `failure_on` can name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ResultSet {
    /// The list as written.
    pub names: Vec<String>,
    #[serde(skip)]
    pub(crate) connect_failure: bool,
    #[serde(skip)]
    pub(crate) reset: bool,
    #[serde(skip)]
    pub(crate) protocol_error: bool,
    #[serde(skip)]
    pub(crate) timeout: bool,
    #[serde(skip)]
    pub(crate) any_5xx: bool,
    #[serde(skip)]
    pub(crate) statuses: Vec<u16>,
}

impl ResultSet {
    /// Parses one list; `Err(entry)` names the first entry that is not understood.
    pub(crate) fn parse(names: &[String]) -> Result<ResultSet, String> {
        let mut s = ResultSet {
            names: names.to_vec(),
            ..ResultSet::default()
        };
        for n in names {
            match n.as_str() {
                "connect_failure" => s.connect_failure = true,
                "reset" => s.reset = true,
                "protocol_error" => s.protocol_error = true,
                "per_try_timeout" | "timeout" => s.timeout = true,
                "5xx" => s.any_5xx = true,
                code => match code.parse::<u16>() {
                    Ok(c) if (100..=599).contains(&c) && code.len() == 3 => s.statuses.push(c),
                    _ => return Err(n.clone()),
                },
            }
        }
        Ok(s)
    }

    pub(crate) fn matches(&self, r: &AttemptResult) -> bool {
        use AttemptResult as R;
        match *r {
            R::Response { status } => {
                (self.any_5xx && (500..=599).contains(&status)) || self.statuses.contains(&status)
            }
            R::ConnectFailure => self.connect_failure,
            R::Reset => self.reset,
            R::ProtocolError => self.protocol_error,
            R::PerTryTimeout => self.timeout,
        }
    }
}
