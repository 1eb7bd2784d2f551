-- index_ended: put the given submissions that have ended into the index of their final status
--   (read here: one that is in flight, or deleted, is left out).
-- KEYS: 1 subs:ended:succeeded, 2 subs:ended:failed, 3 subs:ended:cancelled,
--   4.. sub:{id} of each submission, in the order of ARGV
-- ARGV: the submission ids
-- Returns: how many were indexed

local where = {succeeded = 1, failed = 2, cancelled = 3}
local added = 0
for i = 1, #ARGV do
  local got = redis.call('HMGET', KEYS[3 + i], 'status', 'created_ts')
  local k = got[1] and where[got[1]]
  if k then
    added = added + redis.call('ZADD', KEYS[k], tonumber(got[2] or '0'), ARGV[i])
  end
end
return added
