//! Fail-open that expires, and the evidence of what it let through.
//!
//! With `on_store_error = "allow"`, a global route passes requests while its store cannot
//! answer — but only for `allow_for` per outage. An **outage** is tracked per store shard
//! (the single server, or a Redis Cluster hash slot, as [`crate::GlobalStore::shard`]
//! says): it starts at the first failed store call for a key of that shard and ends at the
//! first successful one there. While an outage is younger than `allow_for`, its keys pass
//! as bypassed; after that they are answered fail-closed (503) until the shard answers.
//!
//! Because the unreachable counter cannot tell what it missed, the gateway keeps its own
//! record: an **episode** spans a route's overlapping bypassing outages and counts the
//! requests passed, the distinct consumers (key digests) and `over_limit` — how many of
//! those a local bucket per key, started from the state the store last reported for that
//! key, would have refused. The last [`KEEP`] episodes per route are kept. An episode ends
//! when no shard of the route is bypassing any more: at the shard's recovery, or when
//! `allow_for` ran out (then `ended` is that instant).
//!
//! Time is the engine's clock (a manual clock in tests); `started`/`ended` are turned into
//! wall-clock RFC 3339 through the offset between the two taken when the tracker is made.
//!
//! Cost: the failure path takes the route's lock; the success path takes it only when
//! some outage is open (an atomic flag), plus one short lock to remember the key's last
//! known `remaining` (only on routes that fail open). Memory is bounded: outages by the
//! number of shards, known states and an episode's consumers by the route's `max_keys`
//! (beyond that the known states are forgotten at once and `consumers` stops growing).

use super::local::{KeyedLimiter, keyed_limiter};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use weir_core::{Limit, Nanos, Verdict};

/// Episodes kept per route.
pub(crate) const KEEP: usize = 100;

/// What a failed store call means for its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnFailure {
    /// Within `allow_for`: pass as bypassed (counted in the open episode).
    Bypass,
    /// The shard's outage outlasted `allow_for`: answer fail-closed.
    Expired,
}

/// One bypass episode.
pub(crate) struct Episode {
    started: Nanos,
    ended: Option<Nanos>,
    requests: u64,
    consumers: HashSet<u64>,
    over_limit: u64,
    /// The per-key local buckets `over_limit` is counted on (dropped when the episode ends).
    buckets: Option<Box<dyn KeyedLimiter>>,
}

#[derive(Default)]
struct State {
    /// Open outages: shard → the instant of its first failed call.
    outages: HashMap<u32, Nanos>,
    open: Option<Episode>,
    done: VecDeque<Episode>,
}

/// A route's outage and episode tracker (kept across reloads with the route).
pub(crate) struct Bypass {
    state: Mutex<State>,
    /// Some outage is open (lets the success path skip the lock).
    outage: AtomicBool,
    /// Key hash → (instant, `remaining`) of the key's last store answer.
    known: Mutex<HashMap<u64, (Nanos, u64)>>,
    /// Wall-clock ns since the epoch minus the engine clock, taken at the first call.
    wall_offset: OnceLock<i128>,
}

/// The route's numbers the tracker needs at each call.
#[derive(Clone, Copy)]
pub(crate) struct Params<'a> {
    pub limit: &'a Limit,
    pub max_keys: u64,
    pub allow_for: Nanos,
    /// The engine clock's wall time minus its instant (`WallClock::wall_offset`), so
    /// episodes are dated by the engine's clock, simulated or real.
    pub wall_offset: i128,
}

impl Bypass {
    /// An empty tracker.
    pub(crate) fn new() -> Bypass {
        Bypass {
            state: Mutex::new(State::default()),
            outage: AtomicBool::new(false),
            known: Mutex::new(HashMap::new()),
            wall_offset: OnceLock::new(),
        }
    }

    /// Fixes the engine-clock → wall-clock offset (the engine's clock gives both).
    fn anchor(&self, wall_offset: i128) {
        self.wall_offset.get_or_init(|| wall_offset);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The store answered for `key` on `shard`: that shard's outage (if any) is over, and
    /// `remaining` is the key's last known state.
    pub(crate) fn success(&self, shard: u32, key: u64, remaining: u64, now: Nanos, p: Params<'_>) {
        {
            let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            if known.len() as u64 >= p.max_keys && !known.contains_key(&key) {
                known.clear();
            }
            known.insert(key, (now, remaining));
        }
        if !self.outage.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.lock();
        s.close_expired(now, p.allow_for);
        if s.outages.remove(&shard).is_some() && s.bypassing(now, p.allow_for).is_none() {
            s.close(now);
        }
        self.outage.store(!s.outages.is_empty(), Ordering::Release);
    }

    /// The store failed for `key` on `shard`: bypass (and count) or, past `allow_for`,
    /// fail closed.
    pub(crate) fn failure(&self, shard: u32, key: u64, now: Nanos, p: Params<'_>) -> OnFailure {
        self.anchor(p.wall_offset);
        let mut s = self.lock();
        s.close_expired(now, p.allow_for);
        let start = *s.outages.entry(shard).or_insert(now);
        self.outage.store(true, Ordering::Release);
        if now.saturating_sub(start) >= p.allow_for {
            return OnFailure::Expired;
        }
        let known = self
            .known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied();
        let e = s.open.get_or_insert_with(|| Episode {
            started: start,
            ended: None,
            requests: 0,
            consumers: HashSet::new(),
            over_limit: 0,
            buckets: keyed_limiter(p.limit, p.max_keys),
        });
        e.requests += 1;
        let first = !e.consumers.contains(&key);
        if first && (e.consumers.len() as u64) < p.max_keys {
            e.consumers.insert(key);
        }
        if let Some(b) = &e.buckets {
            if first && let Some((at, remaining)) = known {
                // Start the key's bucket from what the store last said: take what was
                // already used at that instant.
                let used = p.limit.capacity().saturating_sub(remaining);
                if used > 0 {
                    b.acquire(key, at.min(now), used);
                }
            }
            if b.acquire(key, now, 1).decision.verdict == Verdict::Reject {
                e.over_limit += 1;
            }
        }
        OnFailure::Bypass
    }

    /// Whether some of the route's keys are passed as bypassed now.
    pub(crate) fn active(&self, now: Nanos, allow_for: Nanos) -> bool {
        self.outage.load(Ordering::Acquire) && self.lock().bypassing(now, allow_for).is_some()
    }

    /// The route's episodes, oldest first, as `/admin/bypass` shows them.
    pub(crate) fn json(&self, route: &str, now: Nanos, allow_for: Nanos) -> Vec<serde_json::Value> {
        let mut s = self.lock();
        s.close_expired(now, allow_for);
        s.done
            .iter()
            .chain(s.open.as_ref())
            .map(|e| {
                serde_json::json!({
                    "route": route,
                    "started": self.rfc3339(e.started),
                    "ended": e.ended.map(|t| self.rfc3339(t)),
                    "requests": e.requests,
                    "consumers": e.consumers.len(),
                    "over_limit": e.over_limit,
                })
            })
            .collect()
    }

    fn rfc3339(&self, t: Nanos) -> String {
        let ns = (self.wall_offset.get().copied().unwrap_or(0) + i128::from(t.as_u64())).max(0);
        let secs = u64::try_from(ns / 1_000_000_000).unwrap_or(u64::MAX);
        crate::accesslog::rfc3339(secs, ((ns / 1_000_000) % 1000) as u32)
    }
}

impl State {
    /// The end of the bypass window of the latest-ending outage still bypassing at `now`.
    fn bypassing(&self, now: Nanos, allow_for: Nanos) -> Option<Nanos> {
        self.outages
            .values()
            .map(|&start| start + allow_for)
            .filter(|&end| end > now)
            .max()
    }

    /// Ends the open episode when every outage has outlasted `allow_for`: at the instant
    /// the last one ran out.
    fn close_expired(&mut self, now: Nanos, allow_for: Nanos) {
        if self.open.is_some() && self.bypassing(now, allow_for).is_none() {
            let end = self
                .outages
                .values()
                .map(|&start| start + allow_for)
                .max()
                .unwrap_or(now)
                .min(now);
            self.close(end);
        }
    }

    fn close(&mut self, at: Nanos) {
        if let Some(mut e) = self.open.take() {
            e.ended = Some(at.max(e.started));
            e.buckets = None;
            if self.done.len() == KEEP {
                self.done.pop_front();
            }
            self.done.push_back(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Nanos = Nanos::from_secs(60);

    fn t(s: u64) -> Nanos {
        Nanos::from_secs(1000 + s)
    }

    struct Fix {
        b: Bypass,
        limit: Limit,
    }

    impl Fix {
        fn new() -> Fix {
            Fix {
                b: Bypass::new(),
                limit: Limit::token_bucket(3, Nanos::from_secs(3600), 3).unwrap(),
            }
        }
        fn p(&self) -> Params<'_> {
            Params {
                limit: &self.limit,
                max_keys: 1000,
                allow_for: MIN,
                wall_offset: 1_700_000_000_000_000_000,
            }
        }
        fn fail(&self, shard: u32, key: u64, at: Nanos) -> OnFailure {
            self.b.failure(shard, key, at, self.p())
        }
        fn ok(&self, shard: u32, key: u64, remaining: u64, at: Nanos) {
            self.b.success(shard, key, remaining, at, self.p());
        }
        /// (started, ended, requests, consumers, over_limit) of every episode.
        fn episodes(&self, now: Nanos) -> Vec<(Nanos, Option<Nanos>, u64, usize, u64)> {
            let mut s = self.b.lock();
            s.close_expired(now, MIN);
            s.done
                .iter()
                .chain(s.open.as_ref())
                .map(|e| {
                    (
                        e.started,
                        e.ended,
                        e.requests,
                        e.consumers.len(),
                        e.over_limit,
                    )
                })
                .collect()
        }
    }

    #[test]
    fn fail_open_expires_after_allow_for_and_recovery_resets_it() {
        let f = Fix::new();
        assert!(!f.b.active(t(0), MIN));
        assert_eq!(f.fail(0, 1, t(0)), OnFailure::Bypass);
        assert!(f.b.active(t(0), MIN));
        // Continuous outage: no success in between, however sparse the failures.
        assert_eq!(f.fail(0, 2, t(59)), OnFailure::Bypass);
        assert_eq!(f.fail(0, 1, t(60)), OnFailure::Expired);
        assert!(!f.b.active(t(60), MIN));
        assert_eq!(f.fail(0, 1, t(600)), OnFailure::Expired);
        // The first success ends the outage; the next failure starts a new one.
        f.ok(0, 1, 2, t(601));
        assert_eq!(f.fail(0, 1, t(602)), OnFailure::Bypass);
        let e = f.episodes(t(602));
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].0, e[0].1, e[0].2), (t(0), Some(t(60)), 2));
        assert_eq!((e[1].0, e[1].1), (t(602), None));
    }

    #[test]
    fn outages_are_per_shard() {
        let f = Fix::new();
        assert_eq!(f.fail(7, 1, t(0)), OnFailure::Bypass);
        // Another shard's outage starts later and has its own allow_for.
        assert_eq!(f.fail(9, 2, t(50)), OnFailure::Bypass);
        assert_eq!(f.fail(7, 1, t(60)), OnFailure::Expired);
        assert_eq!(f.fail(9, 2, t(60)), OnFailure::Bypass);
        assert!(f.b.active(t(60), MIN));
        // Shard 9 recovers; shard 7 stays failed closed until it answers itself.
        f.ok(9, 2, 3, t(70));
        assert_eq!(f.fail(7, 1, t(71)), OnFailure::Expired);
        f.ok(7, 1, 3, t(72));
        assert_eq!(f.fail(7, 1, t(73)), OnFailure::Bypass);
        // One episode spans the overlapping outages of shards 7 and 9 (ended by 9's
        // recovery, 7 having run out).
        let e = f.episodes(t(73));
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].0, e[0].1, e[0].2, e[0].3), (t(0), Some(t(70)), 3, 2));
    }

    #[test]
    fn over_limit_counts_from_the_last_known_state() {
        let f = Fix::new();
        // Key 1 had 1 left (of 3) when the store last answered; key 2 was never seen.
        f.ok(0, 1, 1, t(0));
        for i in 0..3 {
            assert_eq!(f.fail(0, 1, t(10 + i)), OnFailure::Bypass);
        }
        for i in 0..4 {
            assert_eq!(f.fail(0, 2, t(20 + i)), OnFailure::Bypass);
        }
        let e = f.episodes(t(30));
        // Key 1: 1 admitted, 2 over; key 2: 3 admitted, 1 over.
        assert_eq!(e, vec![(t(10), None, 7, 2, 3)]);
        f.ok(0, 2, 0, t(40));
        assert_eq!(f.episodes(t(41))[0].1, Some(t(40)));
        assert!(!f.b.active(t(41), MIN));
    }

    #[test]
    fn json_fields_and_the_last_hundred_kept() {
        let f = Fix::new();
        for i in 0..(KEEP as u64 + 5) {
            f.fail(0, i, t(10 * i));
            f.ok(0, i, 3, t(10 * i + 1));
        }
        f.fail(0, 1, t(5000));
        let v = f.b.json("r", t(5001), MIN);
        assert_eq!(v.len(), KEEP + 1);
        let open = &v[KEEP];
        assert_eq!(open["route"], "r");
        assert!(open["ended"].is_null());
        assert_eq!(
            (open["requests"].as_u64(), open["consumers"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(open["over_limit"].as_u64(), Some(0));
        let first = &v[0];
        let (s, e) = (
            first["started"].as_str().unwrap(),
            first["ended"].as_str().unwrap(),
        );
        // RFC 3339 UTC with milliseconds, one second apart (the 6th episode: the first 5
        // were dropped).
        assert_eq!(
            (s.len(), s.as_bytes()[10], s.ends_with('Z')),
            (24, b'T', true)
        );
        assert!(e > s, "{s} {e}");
        assert_eq!(&s[..17], &e[..17]);
    }
}
