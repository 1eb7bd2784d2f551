-- pending_take: the reaper takes a submission whose task was never published (pending since
--   before the cutoff) for rollback: it is flagged, so that neither a replay of its request
--   nor its first request (still publishing) answers 202 for it (Store.take_stale_pending).
-- KEYS: 1 sub:{id}, 2 pending
-- ARGV: 1 id, 2 cutoff_ts
-- Returns: 1 when flagged for rollback; 0 when it is no longer pending or not yet stale

local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
redis.call('HSET', KEYS[1], 'rollback', '1')
return 1
