-- Put a challenge on an account's list of open challenges, if the list has room
-- (shared/bus/challenges.py, Challenges.create and Challenges.refresh).
--
-- KEYS[1]  the account's open challenges of one direction (sorted set: id -> expiry ms)
-- ARGV[1]  the challenge id
-- ARGV[2]  its expiry (ms)
-- ARGV[3]  now (ms): entries expired by then are dropped first
-- ARGV[4]  the most entries the list may hold
--
-- An id already listed has its expiry moved. Returns 1 when listed, 0 when the list
-- was full (nothing changed). The key expires with its latest entry.
local key, id = KEYS[1], ARGV[1]
local expiry, now, most = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if not redis.call('ZSCORE', key, id) and redis.call('ZCARD', key) >= most then
  return 0
end
redis.call('ZADD', key, expiry, id)
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', key, math.max(tonumber(last[2]), expiry))
return 1
