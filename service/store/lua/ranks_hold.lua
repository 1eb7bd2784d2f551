-- ranks_hold: the claim of a rank job (Store.hold_ranks).
-- KEYS: 1 lb:{bench}:{board}:{rule}:ranks-lock
-- ARGV: 1 token, 2 ttl_ms, 3 'take' (the job starts: the lock is its own from now on) or
--   'keep' (refresh it while the job still holds it)
-- Returns: 1, or 0 when the claim is no longer the job's

if ARGV[3] == 'take' or redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
