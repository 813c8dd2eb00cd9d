-- Publish a snapshot with who is there now (after nodes_lib.lua, presence_lib.lua and
-- publish_lib.lua).
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
--
-- Returns as publish_presence.

local room, presence = KEYS[1], KEYS[2]
presence_beats = KEYS[3]

return publish_presence(room, presence, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5],
                        ARGV[6], ARGV[7])
