-- Count a connection in or out (after nodes_lib.lua, presence_lib.lua and attach_lib.lua).
--
--   KEYS[1]  presence     the room's presence hash
--   KEYS[2]  room         the room's record (its TTL is the hash's)
--   ARGV[1]  field        "SEAT:NODE", or "s:NODE" for a spectator
--   ARGV[2]  count        a delta (mode "add") or the count (mode "set")
--   ARGV[3]  mode         "add" or "set"
--   KEYS[3]  node_beats   a Redis Cluster only: the room group's node beats
--   ARGV[4]  node_prefix  how live nodes are told (nodes_lib.lua)
--
-- Returns the field's count now.

local presence, room = KEYS[1], KEYS[2]
local field, count, mode, node_prefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
presence_beats = KEYS[3]

return presence_attach(presence, room, field, count, mode, node_prefix)
