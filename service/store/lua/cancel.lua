-- cancel: queued -> cancelled; running -> cancel_requested (Store.cancel_submission).
-- USES: _end_helpers
-- KEYS: 1 sub:{id}, 2 running, 3 queued:cpu, 4 queued:gpu, 5 sub:{id}:hb,
--   6 sub:{id}:arrays, 7 stats
-- ARGV: 1 id, 2 now_iso, 3 retention_s
-- Returns: 'cancelled', 'cancel_requested', 'missing' or the (terminal) status

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status == 'queued' then
  redis.call('HSET', KEYS[1], 'cancel_requested', '1')
  end_as('cancelled', ARGV[2], ARGV[3])
  return 'cancelled'
end
if status == 'running' then
  redis.call('HSET', KEYS[1], 'cancel_requested', '1')
  return 'cancel_requested'
end
return status
