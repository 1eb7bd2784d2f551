-- finish: write the result document and the succeeded status, and with a ranking the board
-- entries, in one script (Store.finish). The ranking is stored whatever the visibility; it
-- goes on the boards only while the submission is public (read here, atomically with the
-- status: a visibility change during the job is honoured).
-- USES: _end_helpers _leaderboard_helpers _publish_helpers
-- KEYS: 1 sub:{id}, 2 running, 3 queued:cpu, 4 queued:gpu, 5 sub:{id}:hb,
--   6 sub:{id}:arrays, 7 stats, 8 sub:{id}:result,
--   9 stats:duration:{queue}, then with a ranking: 10 lb:{bench}:info and 6 per board
-- ARGV: 1 id, 2 now_iso, 3 result_json, 4 retention_s, 5 duration_s, 6 n_buckets, 7.. the
--   bucket bounds, then ranking_json ("": not a benchmark submission), then the board names
-- Returns: 'succeeded', or the status that prevented it ('missing' when deleted)

local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status ~= 'running' and status ~= 'queued' then return status end
redis.call('SET', KEYS[8], ARGV[3])
redis.call('HSET', KEYS[1], 'progress', '100.0')
redis.call('HDEL', KEYS[1], 'error')
end_as('succeeded', ARGV[2], ARGV[4])
local d = tonumber(ARGV[5])
local nb = tonumber(ARGV[6])
for i = 7, 6 + nb do
  if d <= tonumber(ARGV[i]) then redis.call('HINCRBY', KEYS[9], 'le:' .. ARGV[i], 1) end
end
redis.call('HINCRBY', KEYS[9], 'le:+Inf', 1)
redis.call('HINCRBY', KEYS[9], 'count', 1)
redis.call('HINCRBYFLOAT', KEYS[9], 'sum', ARGV[5])
local a = 7 + nb
if ARGV[a] ~= '' then
  redis.call('HSET', KEYS[1], 'ranking', ARGV[a])
  if #KEYS > 10 and redis.call('HGET', KEYS[1], 'visibility') == 'public' then
    publish(ARGV[1], a + 1)
  end
end
return 'succeeded'
