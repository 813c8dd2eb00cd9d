-- Delete what is left of a room that is gone or still at a given version, and take it
-- off the lobby.
--
--   KEYS[1]  room             the room's record
--   KEYS[2]  events           the room's event stream
--   KEYS[3]  presence         the room's presence hash
--   KEYS[4]  chat_players     the room's players' chat
--   KEYS[5]  chat_spectators  the room's spectators' chat
--   KEYS[6]  live             the lobby (sorted set of unfinished rooms)
--   ARGV[1]  room_id
--   ARGV[2]  version          the version the room must be at ("": it must be gone)
--
-- Returns 1 if it forgot the room, 0 if the room is there at another version.

local room, live = KEYS[1], KEYS[6]
local room_id, version = ARGV[1], ARGV[2]

local current = redis.call('HGET', room, 'version')
if current and current ~= version then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('ZREM', live, room_id)
return 1
