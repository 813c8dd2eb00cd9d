-- Take a seek off the lobby for its acceptor, in one step: of two acceptors at once, on
-- any nodes, exactly one gets it. (shared/bus/lobby.py, SeekBoard.take)
--
-- KEYS[1]  the seeks hash (seek id -> seek JSON)
-- ARGV[1]  the seek's id
-- ARGV[2]  the acceptor's connection id
-- ARGV[3]  the acceptor's player id, or ''
-- ARGV[4]  the node heartbeat key prefix (keys.NODES)
-- ARGV[5]  the seeks' pub/sub channel
--
-- Returns {1, seek JSON} when taken (it is removed: the caller makes the room), {0, ''}
-- when there is no such live seek (a dead node's seek is removed), {-1, ''} when it is
-- the acceptor's own seek (it stays).
--
-- Known exception for the cluster issue: this script reads a key it is not handed, the
-- heartbeat key ARGV[4] .. seek['node'] of the seek's node, and publishes on a channel.
local data = redis.call('HGET', KEYS[1], ARGV[1])
if not data then return {0, ''} end
local seek = cjson.decode(data)
if redis.call('EXISTS', ARGV[4] .. seek['node']) == 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {0, ''}
end
if seek['conn'] == ARGV[2] or (ARGV[3] ~= '' and seek['player'] == ARGV[3]) then
  return {-1, ''}
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[5], '{"kind":"changed"}')
return {1, data}
