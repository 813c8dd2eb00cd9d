-- Take a seek off the lobby for its acceptor, in one step: of two acceptors at once, on
-- any nodes, exactly one gets it. (shared/bus/lobby.py, SeekBoard.take; after nodes_lib.lua)
--
-- KEYS[1]  the seeks hash (seek id -> seek JSON)
-- KEYS[2]  a Redis Cluster only: the node beats (keys.NODE_BEATS, the control slot's)
-- ARGV[1]  the seek's id
-- ARGV[2]  the acceptor's connection id
-- ARGV[3]  the acceptor's player id, or ''
-- ARGV[4]  how live nodes are told (nodes_lib.lua): keys.NODES, or '@' .. ttl_ms
-- ARGV[5]  the seeks' pub/sub channel (the control slot's on a Redis Cluster: SPUBLISH)
--
-- Returns {1, seek JSON} when taken (it is removed: the caller makes the room), {0, ''}
-- when there is no such live seek (a dead node's seek is removed), {-1, ''} when it is
-- the acceptor's own seek (it stays).
local data = redis.call('HGET', KEYS[1], ARGV[1])
if not data then return {0, ''} end
local seek = cjson.decode(data)
if not nodes_alive(ARGV[4], KEYS[2])(seek['node']) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {0, ''}
end
if seek['conn'] == ARGV[2] or (ARGV[3] ~= '' and seek['player'] == ARGV[3]) then
  return {-1, ''}
end
redis.call('HDEL', KEYS[1], ARGV[1])
nodes_publish(nodes_sharded(ARGV[4]), ARGV[5], '{"kind":"changed"}')
return {1, data}
