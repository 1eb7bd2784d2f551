-- progress: write the progress of a running job (Store.set_progress).
-- KEYS: 1 sub:{id}, 2 running, 3 queued:cpu, 4 queued:gpu, 5 sub:{id}:hb,
--   6 sub:{id}:arrays, 7 stats (only 1 is read)
-- ARGV: 1 id, 2 progress
-- Returns: 1, or 0 when the job is not running

if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'progress', ARGV[2])
return 1
