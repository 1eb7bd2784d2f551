-- leaderboard_rows: one page of a board (Store.leaderboard_page).
-- KEYS: 1 lb:{bench}:{board}:{rule} (the board zset), 2 lb:{bench}:{board}:{rule}:sub (its
--   team -> submission map), 3 lb:{bench}:{board}:entry (the entry hash)
-- ARGV: 1 offset, 2 limit
-- Returns: {total} or {total, teams strictly better than the page's first, then per row:
--   team, score, submission (false: none), entry JSON (false: none)}. Scores are Redis's own
--   strings (%.17g: exact).

local total = redis.call('ZCARD', KEYS[1])
local offset, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if limit <= 0 or offset >= total then return {total} end
local page = redis.call('ZRANGE', KEYS[1], offset, offset + limit - 1, 'WITHSCORES')
if #page == 0 then return {total} end
local out = {total, redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. page[2])}
for i = 1, #page, 2 do
  local sub = redis.call('HGET', KEYS[2], page[i])
  local entry = false
  if sub then entry = redis.call('HGET', KEYS[3], sub) end
  out[#out + 1] = page[i]
  out[#out + 1] = page[i + 1]
  out[#out + 1] = sub
  out[#out + 1] = entry
end
return out
