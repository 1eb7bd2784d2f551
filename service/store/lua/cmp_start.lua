-- cmp_start: claim a comparison for one task delivery, with a heartbeat, so that a
-- comparison whose worker vanished is found (its heartbeat expired) and queued again, like a
-- submission (Store.claim_comparison).
-- KEYS: 1 cmp:{id}, 2 cmp:{id}:hb, 3 cmps:running
-- ARGV: 1 id, 2 now_iso, 3 now_ts, 4 token, 5 hb_ttl_ms, 6 max_attempts
-- Returns: {outcome, detail} as the start script does

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'missing', ''} end
if status == 'succeeded' or status == 'failed' or status == 'cancelled' then
  return {'terminal', status}
end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[4] then return {'busy', holder} end
local attempts = tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0')
if attempts >= tonumber(ARGV[6]) then
  redis.call('HSET', KEYS[1], 'status', 'failed', 'finished_at', ARGV[2], 'error',
    'the comparison was started ' .. attempts .. ' times and its worker was lost each time ' ..
    '(max_attempts=' .. ARGV[6] .. '); compare fewer submissions or with fewer resamples')
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[3], ARGV[1])
  return {'terminal', 'failed'}
end
attempts = attempts + 1
redis.call('HSET', KEYS[1], 'status', 'running', 'started_at', ARGV[2], 'attempts', attempts,
  'progress', '0.0')
redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return {'started', tostring(attempts)}
