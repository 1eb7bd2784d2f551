-- pending_done: the task of a stored submission was published; it leaves the pending index
--   unless the reaper has begun to roll it back (Store.mark_enqueued).
-- KEYS: 1 sub:{id}, 2 pending
-- ARGV: 1 id
-- Returns: 1 when marked; 0 when the submission is gone or being rolled back

if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
if redis.call('HEXISTS', KEYS[1], 'rollback') == 1 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
