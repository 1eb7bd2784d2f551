-- suite_page_read: the suite leaderboard route's read in one round trip: admit(), then the
-- cached answer if the state it shows is still the current one (Store.suite_cached).
-- USES: _admit
-- KEYS: 1-3 those of admit(); when ARGV[5] == '1': 4 the cached page, 5 suite:{id},
--   6 its interval document, 7 the interval job's claim, then for each task: bench:{id} and
--   lb:{bench}:info
-- ARGV: 1-4 those of admit(), 5 '1': look the page up
-- Returns: {'denied'}, {'rekey', id}, {'limited', record}, {'miss', record} or {'hit', record,
--   body, disposition}

local outcome, record = admit()
if outcome ~= 'ok' then return {outcome, record} end
if ARGV[5] ~= '1' then return {'miss', record} end
local stored = redis.call('HGET', KEYS[4], 'stamp')
local suite = redis.call('GET', KEYS[5])
if not stored or not suite then return {'miss', record} end
-- the stamp of service.store.suites (same bytes): the inputs' digest (each task's benchmark
-- record, boards' version and finals' counter), the interval document's digest and whether
-- its job is claimed
local parts = {suite}
for k = 8, #KEYS - 1, 2 do
  local bench = redis.call('GET', KEYS[k]) or ''
  local state = redis.call('HMGET', KEYS[k + 1], '__version', '__finals')
  local tag = ''
  if state[1] or state[2] then tag = (state[1] or '') .. '/' .. (state[2] or '') end
  parts[#parts + 1] = redis.sha1hex(bench) .. '|' .. tag
end
local doc = redis.call('GET', KEYS[6])
local stamp = redis.sha1hex(table.concat(parts, '\n')) .. '|' .. (doc and redis.sha1hex(doc) or '')
  .. '|' .. tostring(redis.call('EXISTS', KEYS[7]))
if stored ~= stamp then return {'miss', record} end
local page = redis.call('HMGET', KEYS[4], 'body', 'disposition')
return {'hit', record, page[1], page[2] or ''}
