-- mark_cancelled: the worker stops a job at a checkpoint after a cancel request
-- (Store.mark_cancelled).
-- USES: _end_helpers
-- KEYS: 1 sub:{id}, 2 running, 3 queued:cpu, 4 queued:gpu, 5 sub:{id}:hb,
--   6 sub:{id}:arrays, 7 stats
-- ARGV: 1 id, 2 now_iso, 3 retention_s
-- Returns: 'cancelled', 'missing' or the (terminal) status

local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'running' and status ~= 'queued' then return status or 'missing' end
end_as('cancelled', ARGV[2], ARGV[3])
return 'cancelled'
