-- Take a connection's entries out of the pools. (shared/bus/pool.py, PoolBoard.leave)
--
-- KEYS[1]     the pool hash (entry id -> entry JSON)
-- KEYS[2]     the left entries' sorted set (entry id -> when it was left, ms)
-- ARGV[1]     the connection id
-- ARGV[2]     how long a left entry's id is kept (ms)
-- ARGV[3]     the most ids kept
-- ARGV[4...]  the entry ids
--
-- Removes those of the ids that belong to that connection (others' entries stay). An id
-- that is not there is out being paired (or paired already): it is noted in KEYS[2], so
-- that a pairing that fails does not put it back (pool_restore.lua); ids older than
-- ARGV[2] and past the ARGV[3] newest are dropped. Returns how many were removed.
local removed, now = 0, redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
for i = 4, #ARGV do
  local data = redis.call('HGET', KEYS[1], ARGV[i])
  if data then
    local ok, entry = pcall(cjson.decode, data)
    if ok and type(entry) == 'table' and entry['conn'] == ARGV[1] then
      redis.call('HDEL', KEYS[1], ARGV[i])
      removed = removed + 1
    end
  else
    redis.call('ZADD', KEYS[2], now_ms, ARGV[i])
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms - tonumber(ARGV[2]))
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -tonumber(ARGV[3]) - 1)
return removed
