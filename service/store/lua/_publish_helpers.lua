-- _publish_helpers: put a submission's stored board entries on its boards (publish) or take
-- them off (forget). Needs _leaderboard_helpers before it.
-- KEYS: those of the script it is part of: 1 sub:{id}, whose field ``ranking`` holds the
--   entries as the finish script stores them (JSON: {"team", "created_ts", "entries": {board:
--   [badness, entry_json]}}), 10 lb:{bench}:info, then from 11 the 6 keys of each board (as
--   in _leaderboard_helpers)
-- ARGV: those of the script it is part of: publish(sub, names_at) reads the names of the
--   boards at KEYS[11..] from ARGV[names_at], ARGV[names_at + 1], ...

local function publish(sub, names_at)
  local r = cjson.decode(redis.call('HGET', KEYS[1], 'ranking'))
  redis.call('HSET', KEYS[10], sub, r.team .. '|' .. r.created_ts)
  redis.call('HINCRBY', KEYS[10], '__version', 1)
  local m = 0
  for k = 11, #KEYS, 6 do
    local e = r.entries[ARGV[names_at + m]]
    if e then
      redis.call('HSET', KEYS[k + 5], sub, e[2])
      offer(k, sub, r.team, tonumber(r.created_ts), tonumber(e[1]))
    end
    m = m + 1
  end
end
-- Remove ``sub`` from the boards at KEYS[11..]; a team whose ranked submission it was gets its
-- next best (or latest) one.
local function forget(sub)
  local team = team_of(sub)
  if not team then return 0 end
  for k = 11, #KEYS, 6 do
    redis.call('ZREM', KEYS[k], sub)
    redis.call('HDEL', KEYS[k + 5], sub)
    if redis.call('HGET', KEYS[k + 2], team) == sub
       or redis.call('HGET', KEYS[k + 4], team) == sub then
      redis.call('ZREM', KEYS[k + 1], team)
      redis.call('HDEL', KEYS[k + 2], team)
      redis.call('ZREM', KEYS[k + 3], team)
      redis.call('HDEL', KEYS[k + 4], team)
      local members = redis.call('ZRANGE', KEYS[k], 0, -1, 'WITHSCORES')
      for i = 1, #members, 2 do
        local other = members[i]
        if other ~= sub and team_of(other) == team then
          offer(k, other, team, created_of(other), tonumber(members[i + 1]))
        end
      end
    end
  end
  redis.call('HDEL', KEYS[10], sub)
  redis.call('HINCRBY', KEYS[10], '__version', 1)
  return 1
end
