-- Who is in a room across the cluster (after nodes_lib.lua and presence_lib.lua).
--
--   KEYS[1]  presence     the room's presence hash
--   KEYS[2]  room         the room's record (only its existence is read)
--   KEYS[3]  node_beats   a Redis Cluster only: the room group's node beats
--   ARGV[1]  node_prefix  how live nodes are told (nodes_lib.lua)
--   ARGV[2]  humans       one digit a seat: "1" a human player holds it ("10": seat 0)
--
-- Returns {seat 0 connected 1/0, seat 1 connected, spectators, seat 0 gone ms or -1,
-- seat 1 gone ms or -1}. A human seat found without a connection and without a "gone"
-- time (its node died) is recorded as gone from now.

local presence, room = KEYS[1], KEYS[2]
local node_prefix, humans = ARGV[1], ARGV[2]
presence_beats = KEYS[3]

local counts = presence_counts(presence, node_prefix)
local out = {counts[1] > 0 and 1 or 0, counts[2] > 0 and 1 or 0, counts[3], -1, -1}
local wrote = false
for seat = 0, 1 do
  if counts[seat + 1] == 0 and string.sub(humans, seat + 1, seat + 1) == '1' then
    local gone = redis.call('HGET', presence, 'gone:' .. seat)
    if not gone and redis.call('EXISTS', room) == 1 then
      gone = string.format('%d', presence_now())
      redis.call('HSET', presence, 'gone:' .. seat, gone)
      wrote = true
    end
    out[seat + 4] = tonumber(gone or '-1')
  end
end
if wrote then presence_ttl(presence, room) end
return out
