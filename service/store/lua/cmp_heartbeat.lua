-- cmp_heartbeat: refresh a running comparison's heartbeat (Store.comparison_heartbeat).
-- KEYS: 1 cmp:{id}, 2 cmp:{id}:hb
-- ARGV: 1 token, 2 hb_ttl_ms
-- Returns: 1 while the delivery holds it, else 0

if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 1
