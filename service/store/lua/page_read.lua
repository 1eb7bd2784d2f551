-- page_read: the leaderboard route's read in one round trip: admit(), then the cached page if
-- the state it shows is still the current one (Store.leaderboard_cached).
-- USES: _admit _page_stamp
-- KEYS: 1-3 those of admit(); when ARGV[5] == '1': 4 the cached page, 5 bench:{id},
--   6 lb:{bench}:info, 7 the board's rank document, 8 its claim, [9 the baseline submission]
-- ARGV: 1-4 those of admit(), 5 '1': look the page up
-- Returns: {'denied'}, {'rekey', id}, {'limited', record}, {'miss', record} or {'hit', record,
--   body, disposition}

local outcome, record = admit()
if outcome ~= 'ok' then return {outcome, record} end
if ARGV[5] ~= '1' then return {'miss', record} end
local stored = redis.call('HGET', KEYS[4], 'stamp')
local bench = redis.call('GET', KEYS[5])
if not stored or not bench or stored ~= page_stamp(5, bench) then return {'miss', record} end
local page = redis.call('HMGET', KEYS[4], 'body', 'disposition')
return {'hit', record, page[1], page[2] or ''}
