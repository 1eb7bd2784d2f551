-- fail: a queued or running job fails with an error (Store.fail).
-- USES: _end_helpers
-- KEYS: 1 sub:{id}, 2 running, 3 queued:cpu, 4 queued:gpu, 5 sub:{id}:hb,
--   6 sub:{id}:arrays, 7 stats, 8 the quota zset (when the submission
--   has one and the system failed it)
-- ARGV: 1 id, 2 now_iso, 3 error, 4 retention_s, 5 system ('1': failed by the system, quota
--   refunded)
-- Returns: 'failed', or the status that prevented it ('missing' when deleted)

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status ~= 'running' and status ~= 'queued' then return status end
if ARGV[5] == '1' then refund(8) end
redis.call('HSET', KEYS[1], 'error', ARGV[3])
end_as('failed', ARGV[2], ARGV[4])
return 'failed'
