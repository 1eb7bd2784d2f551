-- set_visibility: change a submission's visibility; a succeeded benchmark submission enters
-- (public) or leaves (private) its boards in the same script, if its benchmark still exists
-- (a deleted one's boards are not made again) (Store.set_visibility).
-- USES: _leaderboard_helpers _publish_helpers
-- KEYS: 1 sub:{id}, 2-8 unused, 9 bench:{id} (the benchmark record), then with a benchmark
--   10 lb:{bench}:info and 6 per board of its stored ranking
-- ARGV: 1 id, 2 visibility, 3 the ranking the caller read ("": none), 4.. the board names
-- Returns: 'missing', 'retry' (the job finished since the caller read its ranking: read
--   again), 'unranked' (a succeeded benchmark submission without a stored ranking),
--   'unchanged' or 'changed'

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
local stored = redis.call('HGET', KEYS[1], 'ranking') or ''
if stored ~= ARGV[3] then return 'retry' end
local current = redis.call('HGET', KEYS[1], 'visibility')
if current ~= 'public' then current = 'private' end
if current == ARGV[2] then return 'unchanged' end
local ranked = status == 'succeeded' and redis.call('HEXISTS', KEYS[1], 'benchmark') == 1
  and redis.call('EXISTS', KEYS[9]) == 1
if ranked and stored == '' then return 'unranked' end
redis.call('HSET', KEYS[1], 'visibility', ARGV[2])
if ranked and #KEYS > 10 then
  if ARGV[2] == 'public' then publish(ARGV[1], 4) else forget(ARGV[1]) end
end
return 'changed'
