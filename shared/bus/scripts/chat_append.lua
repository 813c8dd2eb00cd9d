-- Append one chat line to a room's channel and publish it, in one step, so a kept line
-- is never missing from the live stream or the other way round.
-- (shared/bus/chat.py, ChatLog.append)
--
-- KEYS[1]  the channel's list (keys.chat_key)
-- KEYS[2]  the room (keys.room_key)
-- KEYS[3]  the room's re-archive mark (keys.rearchive_key)
-- KEYS[4]  the archive stream of the room's group (keys.archive: on a Redis Cluster in the
--          room's slot)
-- ARGV[1]  the line without its id (JSON)
-- ARGV[2]  the lines kept per channel
-- ARGV[3]  the room's pub/sub channel (keys.room_channel)
-- ARGV[4]  the room id
-- ARGV[5]  the chat channel's name (players, spectators)
-- ARGV[6]  the re-archive mark's lifetime (ms)
-- ARGV[7]  sharded: '1' on a Redis Cluster, publish with SPUBLISH (the room channel's slot)
--
-- Numbers the line (one more than the last kept), appends it, trims the list, gives it
-- the room's lifetime and publishes it. In a room whose game has ended (the commit that
-- ended it set the room's ``archive`` field), it also queues the room for archiving
-- again, unless such an entry is queued and not read yet (the mark); the entry's ttl_ms
-- keeps the room's remaining lifetime (empty before it was archived: the archiver's
-- default). Returns the line as stored (JSON), or false when the room is gone.
local ttl = redis.call('PTTL', KEYS[2])
if ttl == -2 then return false end
local id = 1
local last = redis.call('LINDEX', KEYS[1], -1)
if last then id = cjson.decode(last)['id'] + 1 end
local line = cjson.decode(ARGV[1])
line['id'] = id
local encoded = cjson.encode(line)
redis.call('RPUSH', KEYS[1], encoded)
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
else
  redis.call('PERSIST', KEYS[1])
end
local message = '{"type":"chat","room":' .. cjson.encode(ARGV[4]) ..
  ',"channel":' .. cjson.encode(ARGV[5]) .. ',"messages":[' .. encoded .. ']}'
if ARGV[7] == '1' then
  redis.call('SPUBLISH', ARGV[3], message)
else
  redis.call('PUBLISH', ARGV[3], message)
end
if redis.call('HEXISTS', KEYS[2], 'archive') == 1 and
   redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[6]) then
  local keep = ''
  if ttl > 0 then keep = tostring(ttl) end
  redis.call('XADD', KEYS[4], '*', 'room', ARGV[4], 'ttl_ms', keep)
end
return encoded
