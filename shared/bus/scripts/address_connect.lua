-- Count one more WebSocket connection of an address on this node, then total the
-- address's connections over the live nodes; over the limit, count it out again.
-- (shared/bus/limits.py, AddressCounters.connect; after nodes_lib.lua)
--
-- KEYS[1]  the address's connection hash (node -> open connections)
-- KEYS[2]  a Redis Cluster only: the node beats (keys.NODE_BEATS, the control slot's)
-- ARGV[1]  this node's name
-- ARGV[2]  the per-address limit
-- ARGV[3]  how live nodes are told (nodes_lib.lua): keys.NODES, or '@' .. ttl_ms
-- ARGV[4]  the hash's lifetime (s)
--
-- Returns the total counted (this connection included); its negation when over the limit.
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('EXPIRE', KEYS[1], ARGV[4])
local total = 0
local entries = redis.call('HGETALL', KEYS[1])
local alive = nodes_alive(ARGV[3], KEYS[2])
for i = 1, #entries, 2 do
  local node = entries[i]
  if node == ARGV[1] or alive(node) then
    total = total + tonumber(entries[i + 1])
  else
    redis.call('HDEL', KEYS[1], node)
  end
end
if total > tonumber(ARGV[2]) then
  if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then
    redis.call('HDEL', KEYS[1], ARGV[1])
  end
  return -total
end
return total
