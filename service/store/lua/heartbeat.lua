-- heartbeat: refresh a job's heartbeat, only for its holder (or when it lapsed while the job
-- is still running) (Store.heartbeat).
-- KEYS: 1 sub:{id}, 2 running, 3 queued:cpu, 4 queued:gpu, 5 sub:{id}:hb,
--   6 sub:{id}:arrays, 7 stats (only 1 and 5 are read)
-- ARGV: 1 id, 2 token, 3 hb_ttl_ms
-- Returns: {status, cancel_requested, holder}

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'missing', '0', ''} end
local holder = redis.call('GET', KEYS[5]) or ''
if status == 'running' and (holder == '' or holder == ARGV[2]) then
  redis.call('SET', KEYS[5], ARGV[2], 'PX', ARGV[3])
  holder = ARGV[2]
end
return {status, redis.call('HGET', KEYS[1], 'cancel_requested') or '0', holder}
