-- Withdraw seeks of one connection. (shared/bus/lobby.py, SeekBoard.remove; after
-- nodes_lib.lua)
--
-- KEYS[1]     the seeks hash (seek id -> seek JSON)
-- ARGV[1]     the connection id
-- ARGV[2]     the seeks' pub/sub channel
-- ARGV[3...]  the seek ids; a first id '@' means a Redis Cluster: the change is published
--             with SPUBLISH (the control slot's channel), and the ids follow it
--
-- Removes those of the ids that belong to that connection (others' seeks stay) and
-- publishes a change if any went. Returns how many were removed.
local removed = 0
local first, sharded = 3, ARGV[3] == '@'
if sharded then first = 4 end
for i = first, #ARGV do
  local data = redis.call('HGET', KEYS[1], ARGV[i])
  if data and cjson.decode(data)['conn'] == ARGV[1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    removed = removed + 1
  end
end
if removed > 0 then nodes_publish(sharded, ARGV[2], '{"kind":"changed"}') end
return removed
