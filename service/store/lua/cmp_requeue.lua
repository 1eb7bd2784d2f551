-- cmp_requeue: a running comparison without a heartbeat is queued again, or fails once it
-- used max_attempts (Store.requeue_comparison).
-- KEYS: 1 cmp:{id}, 2 cmp:{id}:hb, 3 cmps:running, 4 cmps:resend
-- ARGV: 1 id, 2 now_iso, 3 max_attempts, 4 ttl_s, 5 now_ts
-- Returns: 'requeued', 'failed', 'alive' or 'skip' (no longer running)

if redis.call('HGET', KEYS[1], 'status') ~= 'running' then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return 'skip'
end
if redis.call('EXISTS', KEYS[2]) == 1 then return 'alive' end
redis.call('ZREM', KEYS[3], ARGV[1])
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
if attempts >= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'status', 'failed', 'finished_at', ARGV[2], 'error',
    'the worker running this comparison stopped sending heartbeats (none for ' .. ARGV[4] ..
    ' s) on each of its ' .. attempts .. ' attempts (max_attempts=' .. ARGV[3] ..
    '); compare fewer submissions or with fewer resamples')
  return 'failed'
end
redis.call('HSET', KEYS[1], 'status', 'queued', 'progress', '0.0')
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
return 'requeued'
