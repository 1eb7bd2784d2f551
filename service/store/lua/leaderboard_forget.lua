-- leaderboard_forget: remove a submission from a benchmark's boards; a team whose ranked
-- submission it was gets its next best (or latest) one (Store.leaderboard_forget).
-- USES: _leaderboard_helpers _publish_helpers
-- KEYS: 1 sub:{id}, 2-9 unused, 10 lb:{bench}:info, then 6 per board
-- ARGV: 1 id
-- Returns: 1, or 0 when the submission was not on the boards

return forget(ARGV[1])
