-- _admit: authentication and rate counting inside a read's script, so that a read costs one
-- round trip (page_read, submission_read): the key as Store.authenticate finds it and its
-- request counted as Store.hit_rate counts it (live submitter keys only).
-- KEYS: 1 apikey-hash:{digest}, 2 apikey:{id}, 3 rate:{id}:{window} (the current window)
-- ARGV: 1 {id} (the caller's guess of the key's id: KEYS 2 and 3 are its keys), 2 the digest,
--   3 the rate limit (0: none), 4 the rate counter's TTL (s)
-- Returns (admit()): 'ok' and the key record (HGETALL's flat list), 'rekey' and the key's id
--   (call again with it: no other key was touched), 'limited' and the record, or 'denied'. A
--   script returns {outcome, record} for any outcome but 'ok' (Store._read_with_key).

local function admit()
  local id = redis.call('GET', KEYS[1])
  if not id then return 'denied' end
  if id ~= ARGV[1] then return 'rekey', id end
  local record = redis.call('HGETALL', KEYS[2])
  local f = {}
  for i = 1, #record, 2 do f[record[i]] = record[i + 1] end
  if f['hash'] ~= ARGV[2] or f['revoked'] == '1' then return 'denied' end
  local limit = tonumber(ARGV[3])
  if f['role'] ~= 'admin' and limit > 0 then
    local count = redis.call('INCR', KEYS[3])
    redis.call('EXPIRE', KEYS[3], ARGV[4])
    if count > limit then return 'limited', record end
  end
  return 'ok', record
end
