-- Post a seek unless its creator's address has too many open already.
-- (shared/bus/lobby.py, SeekBoard.add; after nodes_lib.lua)
--
-- KEYS[1]  the seeks hash (seek id -> seek JSON)
-- KEYS[2]  a Redis Cluster only: the node beats (keys.NODE_BEATS, the control slot's)
-- ARGV[1]  the new seek's id
-- ARGV[2]  the new seek (JSON, with its creator's node, connection and address)
-- ARGV[3]  the creator's address
-- ARGV[4]  the per-address limit of open seeks
-- ARGV[5]  how live nodes are told (nodes_lib.lua): keys.NODES, or '@' .. ttl_ms
-- ARGV[6]  the seeks' pub/sub channel (the control slot's on a Redis Cluster: SPUBLISH)
--
-- Prunes the seeks of dead nodes (and any entry that is not a seek), counts the
-- address's seeks and adds this one, publishing a change, unless that is over the limit.
-- Returns the address's open seeks with this one; the negated count when refused.
local count = 0
local alive = nodes_alive(ARGV[5], KEYS[2])
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local ok, seek = pcall(cjson.decode, entries[i + 1])
  if not ok or type(seek) ~= 'table' or type(seek['node']) ~= 'string'
     or not alive(seek['node']) then
    redis.call('HDEL', KEYS[1], entries[i])
  elseif seek['address'] == ARGV[3] then
    count = count + 1
  end
end
if count >= tonumber(ARGV[4]) then return -count end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
nodes_publish(nodes_sharded(ARGV[5]), ARGV[6], '{"kind":"changed"}')
return count + 1
