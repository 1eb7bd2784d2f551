-- start: claim a job for one task delivery (Store.mark_running).
-- USES: _end_helpers
-- KEYS: 1 sub:{id}, 2 running, 3 queued:cpu, 4 queued:gpu, 5 sub:{id}:hb,
--   6 sub:{id}:arrays, 7 stats, 8 the quota zset (when the submission
--   has one)
-- ARGV: 1 id, 2 now_iso, 3 now_ts, 4 token, 5 hb_ttl_ms, 6 max_attempts, 7 retention_s,
--   8 worker_name
-- Returns: {'started', attempt}, {'busy', holder}, {'terminal', status} or {'missing', ''}

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'missing', ''} end
if status == 'succeeded' or status == 'failed' or status == 'cancelled' then
  return {'terminal', status}
end
if status == 'running' then
  local holder = redis.call('GET', KEYS[5])
  if holder and holder ~= ARGV[4] then return {'busy', holder} end
end
if redis.call('HGET', KEYS[1], 'cancel_requested') == '1' then
  end_as('cancelled', ARGV[2], ARGV[7])
  return {'terminal', 'cancelled'}
end
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
if attempts >= tonumber(ARGV[6]) then
  refund(8)
  redis.call('HSET', KEYS[1], 'error',
    'the job was started ' .. attempts .. ' times and its worker was lost each time ' ..
    '(max_attempts=' .. ARGV[6] .. '); resubmit it, with fewer points or bootstrap ' ..
    'resamples if the workers run out of memory')
  end_as('failed', ARGV[2], ARGV[7])
  return {'terminal', 'failed'}
end
attempts = attempts + 1
redis.call('HSET', KEYS[1], 'status', 'running', 'started_at', ARGV[2],
           'attempts', attempts, 'progress', '0.0', 'worker', ARGV[8])
redis.call('HDEL', KEYS[1], 'finished_at', 'error')
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('SET', KEYS[5], ARGV[4], 'PX', ARGV[5])
return {'started', tostring(attempts)}
