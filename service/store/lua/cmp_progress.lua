-- cmp_progress: write the progress of a running comparison (Store.set_comparison_progress),
-- only for the task delivery that holds it.
-- KEYS: 1 cmp:{id}, 2 cmp:{id}:hb
-- ARGV: 1 token, 2 progress
-- Returns: 1, or 0 when the comparison is not running under this delivery

if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'progress', ARGV[2])
return 1
