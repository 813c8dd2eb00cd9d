-- Withdraw seeks of one connection. (shared/bus/lobby.py, SeekBoard.remove)
--
-- KEYS[1]     the seeks hash (seek id -> seek JSON)
-- ARGV[1]     the connection id
-- ARGV[2]     the seeks' pub/sub channel
-- ARGV[3...]  the seek ids
--
-- Removes those of the ids that belong to that connection (others' seeks stay) and
-- publishes a change if any went. Returns how many were removed.
local removed = 0
for i = 3, #ARGV do
  local data = redis.call('HGET', KEYS[1], ARGV[i])
  if data and cjson.decode(data)['conn'] == ARGV[1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    removed = removed + 1
  end
end
if removed > 0 then redis.call('PUBLISH', ARGV[2], '{"kind":"changed"}') end
return removed
