-- revoke_copy: mark a key record's copy under its token hash revoked, where it exists (keys
-- created before that copy existed have none: HSET would make a partial record)
-- (Store.revoke_api_key).
-- KEYS: 1 apikey-auth:{digest}
-- ARGV: none
-- Returns: 1

if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'revoked', '1')
end
return 1
