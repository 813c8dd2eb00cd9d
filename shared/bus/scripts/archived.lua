-- The room's game is in the database: acknowledge and drop its archive entry, give the
-- room's keys their remaining lifetime and take the room off the lobby, in one step.
--
--   KEYS[1]  room             the room's record
--   KEYS[2]  events           the room's event stream
--   KEYS[3]  presence         the room's presence hash
--   KEYS[4]  chat_players     the room's players' chat
--   KEYS[5]  chat_spectators  the room's spectators' chat
--   KEYS[6]  live             the lobby (sorted set of unfinished rooms)
--   KEYS[7]  archive          the archive stream
--   ARGV[1]  group            the archivers' consumer group
--   ARGV[2]  entry_id         the room's archive entry
--   ARGV[3]  room_id
--   ARGV[4]  ttl_ms           how long the room's keys stay now
--
-- Returns 1.

local live, archive = KEYS[6], KEYS[7]
local group, entry_id, room_id, ttl_ms = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

redis.call('XACK', archive, group, entry_id)
redis.call('XDEL', archive, entry_id)
for i = 1, 5 do
  redis.call('PEXPIRE', KEYS[i], ttl_ms)
end
redis.call('ZREM', live, room_id)
return 1
