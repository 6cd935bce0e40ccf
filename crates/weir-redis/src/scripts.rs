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
