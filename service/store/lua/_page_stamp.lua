-- _page_stamp: the stamp of a leaderboard answer: everything it shows besides immutable
-- submission fields, and whether its board's rank job is claimed (a read that finds the rank
-- document out of date and no claim queues the job: such a read must not be answered from the
-- cache). service.store.leaderboards.page_stamp computes the same bytes in Python.
-- KEYS: those of the script it is part of, from k: k bench:{id}, k+1 lb:{bench}:info, k+2 the
--   board's rank document lb:{bench}:{board}:{rule}:ranks, k+3 its claim (ranks-lock),
--   [k+4 the baseline submission sub:{id}]
-- ARGV: none

local function page_stamp(k, bench)
  local parts = {redis.sha1hex(bench), redis.call('HGET', KEYS[k + 1], '__version') or '',
                 KEYS[k + 2]}
  local ranks = redis.call('GET', KEYS[k + 2])
  parts[4] = ranks and redis.sha1hex(ranks) or ''
  parts[5] = tostring(redis.call('EXISTS', KEYS[k + 3]))
  if #KEYS >= k + 4 then
    local b = redis.call('HMGET', KEYS[k + 4], 'status', 'visibility')
    parts[6] = KEYS[k + 4]
    parts[7] = (b[1] or '') .. '/' .. (b[2] or '')
  else
    parts[6] = ''
    parts[7] = ''
  end
  return table.concat(parts, '|')
end
