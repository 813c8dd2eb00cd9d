-- Put a taken pair's entries back (their room could not be made), except an entry whose
-- connection left the pool while it was out (pool_leave.lua noted it).
-- (shared/bus/pool.py, PoolBoard.restore)
--
-- KEYS[1]     the pool hash (entry id -> entry JSON)
-- KEYS[2]     the left entries' sorted set (entry id -> when it was left, ms)
-- ARGV[1...]  pairs: an entry id, its JSON
--
-- Returns how many entries were put back.
local restored = 0
for i = 1, #ARGV, 2 do
  if redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    redis.call('ZREM', KEYS[2], ARGV[i])
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    restored = restored + 1
  end
end
return restored
