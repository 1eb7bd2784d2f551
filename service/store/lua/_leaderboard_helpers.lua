-- _leaderboard_helpers: offer a submission to a board's sorted sets (one entry per team under
-- the rules "best" and "latest").
-- KEYS: those of the script it is part of: 10 lb:{bench}:info (sub -> "team|created_ts"); per
--   board, 6 keys from index k: k lb:{bench}:{board}:subs, k+1 lb:{bench}:{board}:best,
--   k+2 its :sub map (team -> sub), k+3 lb:{bench}:{board}:latest, k+4 its :sub map,
--   k+5 lb:{bench}:{board}:entry
-- ARGV: none

local function created_of(sub)
  local info = redis.call('HGET', KEYS[10], sub)
  if not info then return nil end
  return tonumber(string.match(info, '|(.*)$'))
end
local function team_of(sub)
  local info = redis.call('HGET', KEYS[10], sub)
  if not info then return nil end
  return string.match(info, '^(.*)|')
end
-- Offer submission ``sub`` (team, created, badness) to the boards of the metric at key k.
local function offer(k, sub, team, created, badness)
  redis.call('ZADD', KEYS[k], badness, sub)
  local cur = redis.call('ZSCORE', KEYS[k + 1], team)
  if (not cur) or badness < tonumber(cur) then
    redis.call('ZADD', KEYS[k + 1], badness, team)
    redis.call('HSET', KEYS[k + 2], team, sub)
  end
  local cur_sub = redis.call('HGET', KEYS[k + 4], team)
  local newer = true
  if cur_sub and cur_sub ~= sub then
    local cur_created = created_of(cur_sub)
    newer = (not cur_created) or created >= cur_created
  end
  if newer then
    redis.call('ZADD', KEYS[k + 3], badness, team)
    redis.call('HSET', KEYS[k + 4], team, sub)
  end
end
