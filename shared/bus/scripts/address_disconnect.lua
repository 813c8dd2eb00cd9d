-- Count out one WebSocket connection of an address on this node.
-- (shared/bus/limits.py, AddressCounters.disconnect)
--
-- KEYS[1]  the address's connection hash (node -> open connections)
-- ARGV[1]  this node's name
--
-- Returns 1.
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 1
