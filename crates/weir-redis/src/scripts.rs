//! The Lua scripts. Each runs atomically on the Redis server and reads the server's own
//! clock (`TIME`, microseconds), so no instance's clock ever decides.
//!
//! Numbers in Redis' Lua are IEEE doubles: integers are exact below 2^53. Every quantity
//! here stays below that bound for any configuration `weir-policy` accepts (see
//! [`crate::check_exact`]): the token bucket keeps its level in units of
//! `1 / per_us` tokens, so `burst × per_us < 2^53` is checked before a script runs.
//!
//! Every script returns `{allowed, taken, remaining, retry_us, reset_us}` (the leaky
//! bucket returns its delay in µs in place of `taken`):
//! `allowed` 1/0; `taken` tokens granted (≥ cost when allowed; more with a lease);
//! `remaining` whole cost-1 admissions left after the call; `retry_us` for a denial, the
//! time until the cost would be admitted; `reset_us` the time until `remaining` grows.

/// The server's clock in µs (every script's first lines).
macro_rules! now_prelude {
    () => {
        "\nlocal t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    };
}

/// The clock and a window's ARGV: `limit`, `window_us`, `cost`.
macro_rules! window_prelude {
    () => {
        concat!(
            now_prelude!(),
            "local limit = tonumber(ARGV[1])\nlocal win = tonumber(ARGV[2])\nlocal cost = tonumber(ARGV[3])"
        )
    };
}

/// The clock and a bucket's first ARGV: `rate`, `per_us`, `burst` (then its own).
macro_rules! bucket_prelude {
    () => {
        concat!(
            now_prelude!(),
            "local rate = tonumber(ARGV[1])\nlocal per = tonumber(ARGV[2])\nlocal burst = tonumber(ARGV[3])"
        )
    };
}

/// Token bucket, exact: the level `l` counts tokens in units of `1/per_us`, so refilling
/// `elapsed_us × rate` units is exact integer arithmetic (no emission interval rounding).
/// State: hash `{l, t}`; a missing key is a full bucket. TTL = time until full again, at
/// which point the state is equivalent to a fresh (missing) key.
///
/// KEYS[1] state key; ARGV: rate, per_us, burst, cost, want (≥ cost: lease size).
pub const TOKEN_BUCKET: &str = concat!(
    bucket_prelude!(),
    r#"
local cost = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local cap = burst * per
local level = cap
local last = now
local s = redis.call('HMGET', KEYS[1], 'l', 't')
if s[1] then
  level = tonumber(s[1])
  last = tonumber(s[2])
  if now > last then
    local missing = cap - level
    local elapsed = now - last
    if elapsed >= math.ceil(missing / rate) then
      level = cap
    else
      level = level + elapsed * rate
    end
    last = now
  end
end
local need = cost * per
if level < need then
  local retry = math.ceil((need - level) / rate)
  local rem = math.floor(level / per)
  local reset = math.ceil((per * (rem + 1) - level) / rate)
  return {0, 0, rem, retry, reset}
end
local avail = math.floor(level / per)
local take = want
if take > avail then take = avail end
level = level - take * per
if level >= cap then
  redis.call('DEL', KEYS[1])
  return {1, take, math.floor(level / per), 0, 0}
end
redis.call('HSET', KEYS[1], 'l', level, 't', last)
local full_us = math.ceil((cap - level) / rate)
redis.call('PEXPIRE', KEYS[1], math.ceil(full_us / 1000) + 1)
local rem = math.floor(level / per)
local reset = math.ceil((per * (rem + 1) - level) / rate)
return {1, take, rem, 0, reset}
"#
);

/// Fixed window: hash `{w, c}` — window index and count in it. TTL = end of the window.
///
/// KEYS[1] state key; ARGV: limit, window_us, cost.
pub const FIXED_WINDOW: &str = concat!(
    window_prelude!(),
    r#"
local id = math.floor(now / win)
local ends = (id + 1) * win - now
local c = 0
local s = redis.call('HMGET', KEYS[1], 'w', 'c')
if s[1] and tonumber(s[1]) == id then c = tonumber(s[2]) end
if c + cost > limit then
  local rem = limit - c
  if rem < 0 then rem = 0 end
  return {0, 0, rem, ends, ends}
end
c = c + cost
redis.call('HSET', KEYS[1], 'w', id, 'c', c)
redis.call('PEXPIRE', KEYS[1], math.ceil(ends / 1000) + 1)
local reset = 0
if c > 0 then reset = ends end
return {1, cost, limit - c, 0, reset}
"#
);

/// Sliding-window counter: hash `{w, c, p}` — window index, count in it, count in the
/// previous window. The estimate is `c + ceil(p × (win − elapsed) / win)`, rounded up
/// (never admits more than the weighted model). TTL = two windows.
///
/// KEYS[1] state key; ARGV: limit, window_us, cost.
pub const SLIDING_WINDOW: &str = concat!(
    window_prelude!(),
    r#"
local id = math.floor(now / win)
local elapsed = now - id * win
local c, p = 0, 0
local s = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
if s[1] then
  local w = tonumber(s[1])
  if w == id then c = tonumber(s[2]); p = tonumber(s[3])
  elseif w == id - 1 then p = tonumber(s[2]) end
end
local weighted = c + math.ceil(p * (win - elapsed) / win)
if weighted + cost > limit then
  local rem = limit - weighted
  if rem < 0 then rem = 0 end
  local retry
  local room = limit - cost - c
  if room >= 0 and p > 0 then
    -- p * (win - e) / win <= room  <=>  e >= win - room * win / p
    local e = win - math.floor(room * win / p)
    retry = e - elapsed
    if retry < 1 then retry = 1 end
  else
    -- the current window's count must first become the previous one: at the next
    -- window, c*(win - e)/win <= limit - cost  <=>  e >= win - (limit - cost)*win/c
    local e = 0
    if c > 0 then e = win - math.floor((limit - cost) * win / c) end
    if e < 0 then e = 0 end
    retry = (win - elapsed) + e
  end
  return {0, 0, rem, retry, retry}
end
c = c + cost
redis.call('HSET', KEYS[1], 'w', id, 'c', c, 'p', p)
redis.call('PEXPIRE', KEYS[1], math.ceil((2 * win - elapsed) / 1000) + 1)
return {1, cost, limit - (weighted + cost), 0, win - elapsed}
"#
);

/// Leaky bucket with nginx `limit_req` semantics, as `weir-core`'s. Units: one request
/// = `per_us` units, leaking `rate` units per µs (exact). State `{x, t}`: `x` = the excess
/// left by the last passed request *plus that request* (core: `V − last`), at `t`.
/// A request of cost `n` at `now` sees `e = max(0, x − elapsed·rate) + (n − 1)·per_us`;
/// `e > burst·per_us` rejects without changing state; otherwise `x = e + per_us`, and it
/// passes at once when `nodelay` or `e ≤ delay·per_us`, else after
/// `(e − delay·per_us) / rate` µs (rounded up). TTL = time until `x` has leaked away.
///
/// KEYS[1] state key; ARGV: rate, per_us, burst, delay, nodelay (0/1), cost.
/// Returns `{allowed, delay_us, remaining, retry_us, reset_us}`.
pub const LEAKY_BUCKET: &str = concat!(
    bucket_prelude!(),
    r#"
local delay = tonumber(ARGV[4])
local nodelay = tonumber(ARGV[5]) == 1
local cost = tonumber(ARGV[6])
local x, last = 0, now
local s = redis.call('HMGET', KEYS[1], 'x', 't')
if s[1] then
  x = tonumber(s[1])
  last = tonumber(s[2])
end
local elapsed = 0
if now > last then elapsed = now - last end
local left = 0
if elapsed < math.ceil(x / rate) then left = x - elapsed * rate end
if left < 0 then left = 0 end
local e = left + (cost - 1) * per
if e > burst * per then
  local need = x - (burst - cost + 1) * per
  local retry = math.ceil(need / rate) - elapsed
  if retry < 1 then retry = 1 end
  return {0, 0, 0, retry, retry}
end
local nx = e + per
redis.call('HSET', KEYS[1], 'x', nx, 't', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(math.ceil(nx / rate) / 1000) + 1)
local wait = 0
if (not nodelay) and e > delay * per then
  wait = math.ceil((e - delay * per) / rate)
end
local d = delay
if nodelay or d > burst then d = burst end
local rem = 0
if d * per >= nx then rem = math.floor((d * per - nx) / per) + 1 end
local reset = 0
local frac = nx % per
if frac == 0 then frac = per end
reset = math.ceil(frac / rate)
return {1, wait, rem, 0, reset}
"#
);

/// Exact sliding log, as `weir-core`'s: a sorted set of admission instants (µs); an
/// event at `t` counts while `now < t + window`. `cost` units are admitted iff fewer than
/// `limit − cost + 1` events are younger than `window`; otherwise `retry_us` is the time
/// until enough of the oldest leave. TTL = one window after the newest event.
///
/// KEYS[1] sorted set; KEYS[2] sequence counter (same hash tag); ARGV: limit, window_us, cost.
pub const SLIDING_LOG: &str = concat!(
    window_prelude!(),
    r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)
local count = redis.call('ZCARD', KEYS[1])
if count + cost > limit then
  local k = count + cost - limit
  local kth = redis.call('ZRANGE', KEYS[1], k - 1, k - 1, 'WITHSCORES')
  local retry = tonumber(kth[2]) + win - now
  if retry < 1 then retry = 1 end
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local reset = tonumber(oldest[2]) + win - now
  return {0, 0, limit - count, retry, reset}
end
local seq = redis.call('INCRBY', KEYS[2], cost)
for i = 1, cost do
  redis.call('ZADD', KEYS[1], now, now .. ':' .. (seq - cost + i))
end
redis.call('PEXPIRE', KEYS[1], math.ceil(win / 1000) + 1)
redis.call('PEXPIRE', KEYS[2], math.ceil(win / 1000) + 1)
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local reset = tonumber(oldest[2]) + win - now
return {1, cost, limit - count - cost, 0, reset}
"#
);

/// The script of a limit's algorithm.
pub const fn for_kind(k: weir_core::LimitKind) -> &'static str {
    use weir_core::LimitKind as K;
    match k {
        K::TokenBucket => TOKEN_BUCKET,
        K::LeakyBucket => LEAKY_BUCKET,
        K::FixedWindow => FIXED_WINDOW,
        K::SlidingWindow => SLIDING_WINDOW,
        K::SlidingLog => SLIDING_LOG,
    }
}

/// Global quotas (`[routes.quota] scope = "global"`): one script per operation, each on
/// the keys of one descriptor and period (`weir_policy::QuotaKeys`, all hash-tagged by
/// route, so one node runs it).
///
/// `KEYS`: counter hash (`used`, `adjusted`), the idempotency set (`c:ID` consumed,
/// `a:ID` adjustment ids), the key's ledger stream, the period's index of digests.
/// Every script answers `{status, used, adjusted, ledger_sum, entry}` as strings
/// (`status`: `ok`, `dup`, `exhausted`); the ledger script answers the events.
/// Counters are `HINCRBY` integers (exact to 2^63); the limit comparison happens in Lua
/// numbers, so the engine refuses a global limit of 2^53 or more.
pub mod quota {
    /// Shared head: the key's counts, and the expiries of a write.
    macro_rules! quota_prelude {
        () => {
            "local used = tonumber(redis.call('HGET', KEYS[1], 'used') or '0')\n\
             local adj = tonumber(redis.call('HGET', KEYS[1], 'adjusted') or '0')\n\
             local function keep(mk, ku)\n\
               redis.call('EXPIREAT', KEYS[1], ku)\n\
               redis.call('EXPIREAT', KEYS[2], mk)\n\
               redis.call('EXPIREAT', KEYS[3], ku)\n\
               redis.call('EXPIREAT', KEYS[4], ku)\n\
             end\n\
             local function answer(st, e)\n\
               return {st, string.format('%d', used), string.format('%d', adj), '0', e or ''}\n\
             end\n"
        };
    }

    /// ARGV: limit, cost, event id (`""`: none), event JSON, markers_until, keep_until,
    /// digest. Duplicate → `dup`; `used + cost > limit + adjusted` → `exhausted`; else
    /// consumed and one `consume` entry appended (`entry` = its stream id).
    pub const CONSUME: &str = concat!(
        quota_prelude!(),
        "local limit = tonumber(ARGV[1])\n\
         local cost = tonumber(ARGV[2])\n\
         local id = ARGV[3]\n\
         if id ~= '' and redis.call('SISMEMBER', KEYS[2], 'c:' .. id) == 1 then return answer('dup') end\n\
         local eff = limit + adj\n\
         if eff < 0 then eff = 0 end\n\
         if used + cost > eff then return answer('exhausted') end\n\
         used = redis.call('HINCRBY', KEYS[1], 'used', cost)\n\
         if id ~= '' then redis.call('SADD', KEYS[2], 'c:' .. id) end\n\
         local e = redis.call('XADD', KEYS[3], '*', 'k', 'consume', 'a', cost, 'e', ARGV[4])\n\
         redis.call('SADD', KEYS[4], ARGV[7])\n\
         keep(ARGV[5], ARGV[6])\n\
         return answer('ok', e)\n"
    );

    /// ARGV: entry, cost, event id. Deletes the entry; only if it was there, un-counts it
    /// and forgets the event id.
    pub const RELEASE: &str = concat!(
        quota_prelude!(),
        "if redis.call('XDEL', KEYS[3], ARGV[1]) == 1 then\n\
           used = redis.call('HINCRBY', KEYS[1], 'used', -tonumber(ARGV[2]))\n\
           if ARGV[3] ~= '' then redis.call('SREM', KEYS[2], 'c:' .. ARGV[3]) end\n\
           return answer('ok')\n\
         end\n\
         return answer('dup')\n"
    );

    /// ARGV: cost, event id, event JSON, markers_until, keep_until, digest. A bypass
    /// event written back once: `dup` when the id was consumed already.
    pub const BYPASS: &str = concat!(
        quota_prelude!(),
        "if redis.call('SISMEMBER', KEYS[2], 'c:' .. ARGV[2]) == 1 then return answer('dup') end\n\
         redis.call('SADD', KEYS[2], 'c:' .. ARGV[2])\n\
         used = redis.call('HINCRBY', KEYS[1], 'used', tonumber(ARGV[1]))\n\
         redis.call('HINCRBY', KEYS[1], 'adjusted', 0)\n\
         redis.call('XADD', KEYS[3], '*', 'k', 'bypass', 'a', ARGV[1], 'e', ARGV[3])\n\
         redis.call('SADD', KEYS[4], ARGV[6])\n\
         keep(ARGV[4], ARGV[5])\n\
         return answer('ok')\n"
    );

    /// ARGV: amount (signed), event id, event JSON, markers_until, keep_until, digest.
    pub const ADJUST: &str = concat!(
        quota_prelude!(),
        "if redis.call('SISMEMBER', KEYS[2], 'a:' .. ARGV[2]) == 1 then return answer('dup') end\n\
         redis.call('SADD', KEYS[2], 'a:' .. ARGV[2])\n\
         adj = redis.call('HINCRBY', KEYS[1], 'adjusted', tonumber(ARGV[1]))\n\
         redis.call('HINCRBY', KEYS[1], 'used', 0)\n\
         redis.call('XADD', KEYS[3], '*', 'k', 'adjust', 'a', ARGV[1], 'e', ARGV[3])\n\
         redis.call('SADD', KEYS[4], ARGV[6])\n\
         keep(ARGV[4], ARGV[5])\n\
         return answer('ok')\n"
    );

    /// No ARGV. The key's counts and the sum of its `consume` and `bypass` entries.
    pub const REPORT: &str = concat!(
        quota_prelude!(),
        "local sum = 0\n\
         for _, en in ipairs(redis.call('XRANGE', KEYS[3], '-', '+')) do\n\
           local f = en[2]\n\
           local k, a = nil, 0\n\
           for i = 1, #f, 2 do\n\
             if f[i] == 'k' then k = f[i + 1] elseif f[i] == 'a' then a = tonumber(f[i + 1]) end\n\
           end\n\
           if k ~= 'adjust' then sum = sum + a end\n\
         end\n\
         return {'ok', string.format('%d', used), string.format('%d', adj), string.format('%d', sum), ''}\n"
    );

    /// KEYS: the period's index; ARGV: the period's key prefix. Every key's events
    /// (the `e` field of each entry), key by key in entry order. The streams it reads
    /// share the index's hash tag (one slot).
    pub const LEDGER: &str = "local out = {}\n\
         for _, d in ipairs(redis.call('SMEMBERS', KEYS[1])) do\n\
           for _, en in ipairs(redis.call('XRANGE', ARGV[1] .. d .. ':log', '-', '+')) do\n\
             local f = en[2]\n\
             for i = 1, #f, 2 do\n\
               if f[i] == 'e' then out[#out + 1] = f[i + 1] end\n\
             end\n\
           end\n\
         end\n\
         return out\n";
}
