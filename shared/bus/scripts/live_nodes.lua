-- The server nodes that beat within a heartbeat's lifetime, by the Redis clock their beats
-- are on (a Redis Cluster's list of nodes: no SCAN).
--
--   KEYS[1]  node_beats  sorted set: node -> last heartbeat (ms)
--   ARGV[1]  ttl_ms      a node silent this long is not listed
--
-- Returns the names of the nodes that beat within ttl_ms.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[1]), '+inf')
