-- requeue: a running job without a heartbeat goes back to its queue, or fails once it used
-- max_attempts (Store.requeue_orphan).
-- USES: _end_helpers
-- KEYS: 1 sub:{id}, 2 running, 3 queued:cpu, 4 queued:gpu, 5 sub:{id}:hb,
--   6 sub:{id}:arrays, 7 stats, 8 resend, 9 the quota zset (when the
--   submission has one)
-- ARGV: 1 id, 2 now_iso, 3 retention_s, 4 max_attempts, 5 ttl_s, 6 now_ts
-- Returns: 'requeued', 'failed', 'cancelled', 'alive' or 'skip' (no longer running)

local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'running' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 'skip'
end
if redis.call('EXISTS', KEYS[5]) == 1 then return 'alive' end
if redis.call('HGET', KEYS[1], 'cancel_requested') == '1' then
  end_as('cancelled', ARGV[2], ARGV[3])
  return 'cancelled'
end
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
if attempts >= tonumber(ARGV[4]) then
  refund(9)
  redis.call('HSET', KEYS[1], 'error',
    'the worker running this job stopped sending heartbeats (none for ' .. ARGV[5] ..
    ' s) on each of its ' .. attempts .. ' attempts (max_attempts=' .. ARGV[4] ..
    '); the batch may exhaust a worker\'s memory or time limit: resubmit it smaller ' ..
    'or with fewer bootstrap resamples')
  end_as('failed', ARGV[2], ARGV[3])
  return 'failed'
end
local queue = redis.call('HGET', KEYS[1], 'queue')
local qkey = KEYS[3]
if queue == 'gpu' then qkey = KEYS[4] end
redis.call('HSET', KEYS[1], 'status', 'queued', 'progress', '0.0')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', qkey, redis.call('HGET', KEYS[1], 'created_ts'), ARGV[1])
redis.call('HINCRBY', KEYS[7], 'requeued', 1)
redis.call('ZADD', KEYS[8], ARGV[6], ARGV[1])
return 'requeued'
