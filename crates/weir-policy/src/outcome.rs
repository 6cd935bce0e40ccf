//! How a request ended, as one typed value: the `outcome` label of
//! `weir_requests_total`, the `reason` (and `x-weir-reason`) of a response the gateway
//! makes itself, and the `error` of an access-log record.
//!
//! One enum instead of strings, so a frontend cannot spell an outcome its own way: a client
//! that goes away is [`Outcome::ClientAborted`] on every frontend (status 499 when nothing
//! was written, as nginx logs it).

use serde::Serialize;

macro_rules! outcomes {
    ($( $(#[$doc:meta])* $v:ident = ($name:literal, $status:literal), )*) => {
        /// How a request ended (see the module docs). [`Outcome::as_str`] is the docs/HTTP.md
        /// spelling; [`Outcome::status`] the status of the response the gateway makes for it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Outcome {
            $( $(#[$doc])* $v, )*
        }

        impl Outcome {
            /// Every outcome, in declaration order (`ALL[o as usize] == o`).
            pub const ALL: &'static [Outcome] = &[$(Outcome::$v),*];

            /// The docs/HTTP.md spelling (`"rate_limited"`, ...).
            pub const fn as_str(self) -> &'static str {
                match self { $(Outcome::$v => $name,)* }
            }

            /// The status of the response the gateway writes for this outcome (0 for
            /// outcomes that are not a gateway response: `proxied`, `fallback`, ...).
            pub const fn status(self) -> u16 {
                match self { $(Outcome::$v => $status,)* }
            }
        }
    };
}

outcomes! {
    /// The upstream's response was forwarded.
    Proxied = ("proxied", 0),
    /// The route's fallback response was written.
    Fallback = ("fallback", 0),
    /// The request ended before the engine decided anything (the flow was dropped).
    Aborted = ("aborted", 499),
    /// 429: the rate limit is exceeded.
    RateLimited = ("rate_limited", 429),
    /// 429: the route's quota for this key is used up until the next period.
    QuotaExhausted = ("quota_exhausted", 429),
    /// 401: the route needs a credential and the request has none.
    Unauthenticated = ("unauthenticated", 401),
    /// 401: the bearer token is not valid (signature, algorithm, issuer, audience, time, `kid`, form).
    InvalidToken = ("invalid_token", 401),
    /// 401: the API key is unknown.
    InvalidApiKey = ("invalid_api_key", 401),
    /// 403: the credential is valid but lacks a required scope.
    InsufficientScope = ("insufficient_scope", 403),
    /// 403: a key part is missing and `deny_empty_key`.
    EmptyKey = ("empty_key", 403),
    /// 400: a key part is longer than `max_key_bytes`.
    KeyTooLong = ("key_too_long", 400),
    /// 503: the global store did not answer and `on_store_error = "deny"`.
    RatelimitStoreUnavailable = ("ratelimit_store_unavailable", 503),
    /// 503: every permit taken and the queue full.
    ConcurrencyLimited = ("concurrency_limited", 503),
    /// 503: the queue wait ran out.
    QueueTimeout = ("queue_timeout", 503),
    /// 503: the breaker is open.
    CircuitOpen = ("circuit_open", 503),
    /// 502: no attempt got a valid response head.
    UpstreamUnavailable = ("upstream_unavailable", 502),
    /// 504: the total deadline is spent.
    DeadlineExceeded = ("deadline_exceeded", 504),
    /// 504: the last try timed out.
    PerTryTimeout = ("per_try_timeout", 504),
    /// 404: no route matched.
    NoRoute = ("no_route", 404),
    /// 400: a malformed request.
    BadRequest = ("bad_request", 400),
    /// 431: the request head is too large.
    HeadersTooLarge = ("headers_too_large", 431),
    /// 414: the request line is too long.
    UriTooLong = ("uri_too_long", 414),
    /// 408: the client was too slow.
    ClientTimeout = ("client_timeout", 408),
    /// 505: an HTTP version other than 1.0 / 1.1.
    HttpVersionNotSupported = ("http_version_not_supported", 505),
    /// Access-log `error`: the upstream body was cut short after its head was forwarded.
    UpstreamBodyTruncated = ("upstream_body_truncated", 0),
    /// Access-log `error`: the client went away before the response was complete.
    ClientAborted = ("client_aborted", 499),
}

impl Outcome {
    /// The outcome of a docs/HTTP.md spelling (e.g. a reason a frontend's HTTP parser reports).
    pub fn from_reason(s: &str) -> Option<Outcome> {
        Outcome::ALL.iter().copied().find(|o| o.as_str() == s)
    }
}

impl Outcome {
    /// The outcome of a request the frontend's HTTP layer refused, by that layer's reason
    /// (`"uri_too_long"`, ...); a reason the engine does not know is `bad_request`.
    pub fn malformed(reason: &str) -> Outcome {
        Outcome::from_reason(reason).unwrap_or(Outcome::BadRequest)
    }
}

impl core::fmt::Display for Outcome {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Outcome;

    #[test]
    fn spellings_are_unique_and_round_trip() {
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i);
            assert_eq!(Outcome::from_reason(o.as_str()), Some(*o));
        }
        assert_eq!(Outcome::from_reason("client_closed"), None);
    }
}
