-- pending_claim: an idempotent replay of a submission asks whether its task was published.
--   A submission still in the pending index (its first request failed between storing and
--   publishing) is claimed by the replay, which publishes it: its pending time is set to now,
--   so the reaper does not roll it back meanwhile (Store.claim_pending).
-- KEYS: 1 sub:{id}, 2 pending
-- ARGV: 1 id, 2 now_ts
-- Returns: 'gone', 'rolling_back' (the reaper is deleting it), 'claimed' or 'enqueued'

if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
if redis.call('HEXISTS', KEYS[1], 'rollback') == 1 then return 'rolling_back' end
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  return 'claimed'
end
return 'enqueued'
