-- _end_helpers: how a submission script ends a job: it leaves the indexes, its arrays expire,
-- its benchmark quota is refunded, the job counters count it.
-- KEYS: those of the script it is part of: the submissions' common layout
--   1 sub:{id}, 2 running, 3 queued:cpu, 4 queued:gpu, 5 sub:{id}:hb,
--   6 sub:{id}:arrays, 7 stats; refund(k) reads the quota zset as KEYS[k]
-- ARGV: those of the script it is part of: 1 the submission id

local function leave_indexes()
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('DEL', KEYS[5])
end
local function expire_arrays(retention)
  retention = tonumber(retention)
  if retention <= 0 then redis.call('DEL', KEYS[6])
  else redis.call('EXPIRE', KEYS[6], retention) end
end
-- A job failed by the system does not count against its team's benchmark quota. The quota
-- zset is KEYS[k] (the caller read the submission's ``quota_key``, which never changes after
-- creation): a script touches only declared keys. Called before any other write of its
-- script, so that a caller passing the wrong key aborts the script with nothing written.
local function refund(k)
  local qk = redis.call('HGET', KEYS[1], 'quota_key')
  if not qk then return end
  if KEYS[k] ~= qk then
    error('the quota key of ' .. ARGV[1] .. ' was not passed as KEYS[' .. k .. ']')
  end
  redis.call('ZREM', KEYS[k], ARGV[1])
  redis.call('HSET', KEYS[1], 'quota_refunded', '1')
end
local function end_as(status, finished_at, retention)
  redis.call('HSET', KEYS[1], 'status', status, 'finished_at', finished_at)
  leave_indexes()
  -- A succeeded benchmark submission keeps its arrays (rank intervals, comparisons).
  if not (status == 'succeeded' and redis.call('HEXISTS', KEYS[1], 'benchmark') == 1) then
    expire_arrays(retention)
  end
  redis.call('HINCRBY', KEYS[7], status, 1)
end
