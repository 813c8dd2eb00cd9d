-- A player's connection on this node left: counted out, and the room's snapshot
-- published with who is there now, in one step (after nodes_lib.lua, presence_lib.lua,
-- attach_lib.lua and publish_lib.lua). The count changes whatever the version; the
-- snapshot goes out only if the room is still at its version.
--
--   KEYS[1]  room         the room's record (its version is checked)
--   KEYS[2]  presence     the room's presence hash
--   ARGV[1]  version      the version the snapshot was made from
--   KEYS[3]  node_beats   a Redis Cluster only: the room group's node beats
--   ARGV[2]  node_prefix  how live nodes are told (nodes_lib.lua); the Redis Cluster form
--                         publishes with SPUBLISH
--   ARGV[3]  seat_flags   one letter a seat (see presence_splice)
--   ARGV[4]  head         the snapshot's parts (see presence_splice)
--   ARGV[5]  seat0
--   ARGV[6]  seat1
--   ARGV[7]  channel      the room's pub/sub channel
--   ARGV[8]  field        "SEAT:NODE", the connection counted out
--
-- Returns as publish_presence.

local room, presence = KEYS[1], KEYS[2]
presence_beats = KEYS[3]

presence_attach(presence, room, ARGV[8], -1, 'add', ARGV[2])
return publish_presence(room, presence, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5],
                        ARGV[6], ARGV[7])
