-- Presence: who is attached to a room, on which node (a library: joined after
-- nodes_lib.lua and before the scripts that use it, see kibitz.shared.bus.scripts.source).
--
-- The presence hash's fields: "SEAT:NODE" -> connections of that seat's player on that
-- node, "s:NODE" -> spectators on that node, "gone:SEAT" -> epoch ms since when that
-- seat's player has had no connection anywhere. A dead node's entries stop counting with
-- it. ``node_prefix`` tells live nodes as nodes_lib.lua says: on a single Redis the
-- heartbeat key prefix (a node is live while node_prefix .. NODE exists: keys any node
-- may have, which a single Redis lets a script read unnamed); on a Redis Cluster
-- '@' .. ttl_ms, the script setting ``presence_beats`` to the room group's copy of the
-- node beats (keys.group_node_beats), a key it is handed, in the room's slot.

local PRESENCE_GONE_TTL_MS = 60000  -- the presence hash of a room that is gone lives this long
local presence_beats = nil  -- a Redis Cluster: the room group's node beats (set from KEYS)

local function presence_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- {seat 0 connections, seat 1 connections, spectators} on live nodes.
local function presence_counts(hash, node_prefix)
  local alive = nodes_alive(node_prefix, presence_beats)
  local counts = {0, 0, 0}
  local entries = redis.call('HGETALL', hash)
  for i = 1, #entries, 2 do
    local n = tonumber(entries[i + 1]) or 0
    local seat, node = string.match(entries[i], '^(%d+):(.+)$')
    local slot = seat and (tonumber(seat) + 1)
    if not seat then
      node = string.match(entries[i], '^s:(.+)$')
      slot = node and 3
    end
    if slot and slot <= 3 and n > 0 then
      if alive(node) then counts[slot] = counts[slot] + n end
    end
  end
  return counts
end

-- The presence hash lives as long as its room (its TTL, if any; a minute if it is gone).
local function presence_ttl(hash, room)
  local ttl = redis.call('PTTL', room)
  if ttl == -2 then ttl = PRESENCE_GONE_TTL_MS end
  if ttl > 0 then redis.call('PEXPIRE', hash, ttl) end
end

-- A snapshot with who is there spliced in. flags: one letter a seat: "a" an AI, "p" the
-- player just seated (connected, whatever the counts say), "h" another human player
-- (gone since the recorded time when no connection counts; a missing time is recorded
-- as now: its node died), "-" a free seat. head, s0, s1: the snapshot's JSON without
-- "seats" and "spectators", and each seat's without "connected" and "gone_ms", each
-- without its closing brace. Returns the JSON and {connected 0, connected 1,
-- spectators, gone 0 or -1, gone 1 or -1}.
local function presence_splice(hash, room, node_prefix, flags, head, s0, s1)
  local counts = presence_counts(hash, node_prefix)
  local out = {0, 0, counts[3], -1, -1}
  local parts = {head, ',"seats":['}
  local wrote = false
  for seat = 0, 1 do
    local flag = string.sub(flags, seat + 1, seat + 1)
    local connected = flag == 'a' or flag == 'p' or counts[seat + 1] > 0
    local gone = 'null'
    if flag == 'h' and not connected then
      gone = redis.call('HGET', hash, 'gone:' .. seat)
      if not (gone and string.match(gone, '^%d+$')) then
        gone = string.format('%d', presence_now())
        redis.call('HSET', hash, 'gone:' .. seat, gone)
        wrote = true
      end
      out[seat + 4] = tonumber(gone)
    end
    if connected then out[seat + 1] = 1 end
    if seat == 1 then parts[#parts + 1] = ',' end
    parts[#parts + 1] = seat == 0 and s0 or s1
    parts[#parts + 1] = ',"connected":' .. (connected and 'true' or 'false')
    parts[#parts + 1] = ',"gone_ms":' .. gone .. '}'
  end
  parts[#parts + 1] = '],"spectators":' .. string.format('%d', counts[3]) .. '}'
  if wrote then presence_ttl(hash, room) end
  return table.concat(parts), out
end
