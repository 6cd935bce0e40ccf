//! The Lua scripts. Each runs atomically on the Redis server and reads the server's own
//! clock (`TIME`, microseconds), so no instance's clock ever decides (seeds 000, 003).
//!
//! Numbers in Redis' Lua are IEEE doubles: integers are exact below 2^53. Every quantity
//! here stays below that bound for any configuration `weir-policy` accepts (see
//! [`crate::Limit::validate`]): the token bucket keeps its level in units of
//! `1 / per_us` tokens, so `burst × per_us < 2^53` is checked before a script runs.
//!
//! Every script returns `{allowed, taken, remaining, retry_us, reset_us}`:
//! `allowed` 1/0; `taken` tokens granted (≥ cost when allowed; more with a lease);
//! `remaining` whole cost-1 admissions left after the call; `retry_us` for a denial, the
//! time until the cost would be admitted; `reset_us` the time until `remaining` grows.

/// Token bucket, exact: the level `l` counts tokens in units of `1/per_us`, so refilling
/// `elapsed_us × rate` units is exact integer arithmetic (no emission interval rounding).
/// State: hash `{l, t}`; a missing key is a full bucket. TTL = time until full again, at
/// which point the state is equivalent to a fresh (missing) key.
///
/// KEYS[1] state key; ARGV: rate, per_us, burst, cost, want (≥ cost: lease size).
pub(crate) const TOKEN_BUCKET: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
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
"#;

/// Fixed window: hash `{w, c}` — window index and count in it. TTL = end of the window.
///
/// KEYS[1] state key; ARGV: limit, window_us, cost.
pub(crate) const FIXED_WINDOW: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local win = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
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
"#;

/// Sliding-window counter: hash `{w, c, p}` — window index, count in it, count in the
/// previous window. The estimate is `c + ceil(p × (win − elapsed) / win)`, rounded up
/// (never admits more than the weighted model). TTL = two windows.
///
/// KEYS[1] state key; ARGV: limit, window_us, cost.
pub(crate) const SLIDING_WINDOW: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local win = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
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
"#;
