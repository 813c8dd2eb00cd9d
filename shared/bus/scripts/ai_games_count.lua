-- An owner's AI games in one slot group of a Redis Cluster, read only (after nodes_lib.lua
-- and ai_games_lib.lua): the commit of a new AI room counts the other groups' with this
-- just before (shared/bus/store.py, RoomStore.commit_plan).
--
--   KEYS[1]     ai_games    the owner's unfinished AI games in the group
--   KEYS[2]     live        the group's unfinished rooms
--   KEYS[3]     node_beats  the group's copy of the node beats
--   KEYS[4...]  the presence hash of each room in KEYS[1] when the caller read it
--   ARGV[1]     nodes       how live nodes are told: '@' .. the node TTL (ms)
--   ARGV[2]     grace_ms    an AI game whose human has been gone this long stops counting
--   ARGV[3]     listed      room ids returned, at most, of the played ones and of the others
--
-- Returns {counted, unfinished, n, n played room ids, then up to ``listed`` idle ones}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local counted, unfinished, playing, idle = ai_games_count(
  KEYS[1], KEYS[2], ai_games_presence_handed(4), nodes_alive(ARGV[1], KEYS[3]), now,
  ARGV[2], ARGV[3])
local out = {counted, unfinished, #playing}
for _, id in ipairs(playing) do out[#out + 1] = id end
for _, id in ipairs(idle) do out[#out + 1] = id end
return out
