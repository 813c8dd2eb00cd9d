-- Count one room an address causes in its sliding window, unless the window's budget is
-- spent. (shared/bus/limits.py, AddressCounters.count_create)
--
-- KEYS[1]  the address's room log (sorted set: member -> Redis time in ms)
-- ARGV[1]  the window (ms)
-- ARGV[2]  the budget: rooms per window
-- ARGV[3]  this count's member (random, unique)
--
-- Drops the rooms counted before the window, then counts this one (now, by Redis's
-- clock, the same for every node). Returns the count in the window with this one; when
-- the budget is spent, counts nothing and returns the negated count.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[2]) then return -count end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
return count + 1
