-- submission_read: a submission read in one round trip (GET /v1/submissions/{id}, the polling
-- hot path): admit(), then the submission's record, its result document once it succeeded,
-- and its position in its queue while it is queued (Store.read_submission).
-- USES: _admit
-- KEYS: 1-3 those of admit(), 4 sub:{id}, 5 sub:{id}:result, then the queued zsets of the
--   queues named ARGV[6], ARGV[7], ...
-- ARGV: 1-4 those of admit(), 5 the submission id, 6.. the queue names
-- Returns: {'denied'}, {'rekey', id}, {'limited', record} or {'found', key record, submission
--   record (false: none), result (false: none), queue position (false: none)}

local outcome, record = admit()
if outcome ~= 'ok' then return {outcome, record} end
local sub = redis.call('HGETALL', KEYS[4])
if #sub == 0 then return {'found', record, false, false, false} end
local status, queue
for i = 1, #sub, 2 do
  if sub[i] == 'status' then status = sub[i + 1]
  elseif sub[i] == 'queue' then queue = sub[i + 1] end
end
local result, position = false, false
if status == 'succeeded' then
  result = redis.call('GET', KEYS[5]) or false
elseif status == 'queued' then
  for i = 6, #ARGV do
    if ARGV[i] == queue then
      local rank = redis.call('ZRANK', KEYS[i], ARGV[5])
      if rank then position = rank end
    end
  end
end
return {'found', record, sub, result, position}
