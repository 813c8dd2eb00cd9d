-- The games against the AI a person is actually playing (a library after nodes_lib.lua:
-- the commit uses it before a new AI room is written, and ai_games_count.lua counts them
-- in the other slot groups of a Redis Cluster). It reads the presence hashes
-- presence_lib.lua keeps.
--
-- An owner's set (KEYS ai_games of the commit: room id -> last commit, ms) holds its
-- unfinished AI rooms. A room counts against the owner's cap while its human is there:
-- a seat's player has a connection on a live node, or the room's latest "gone:SEAT"
-- time is less than grace_ms old, or the hash has no seat entry at all yet (the room was
-- just created: its player's connection is counted in right after the commit). A player
-- whose only connections were on nodes that died (entries, but none live, and no "gone"
-- time: nobody recorded the departure) is not playing it: a client that comes back
-- resumes the room on another node, and then it counts again. A room no longer in the
-- lobby set (over, or gone) does not count.
--
-- The presence hash of each of the owner's rooms, and the liveness of the nodes named
-- there, are read through ``presence_of`` (id -> the hash's key, or nil) and ``alive``
-- (nodes_lib.lua's). On a single Redis presence_of builds the key (room_prefix .. '{' ..
-- id .. '}:presence') and alive reads heartbeat keys, keys not handed to the script, which
-- a single Redis allows. On a Redis Cluster the owner's set is per slot group, and the
-- script is handed the presence hash of each room the set held when the caller read it
-- (the room group's slot), and the group's node beats: a room added since (not handed)
-- counts as played, so a count is never low. The set is bounded (ai_games_kept), so the
-- reads are.

-- Whether the human of the room whose presence hash is ``hash`` is still playing (see
-- above); nil ``hash``: a room the script was not handed (counted as played).
local function ai_game_playing(hash, since_ms, alive)
  if not hash then return true end
  local entries = redis.call('HGETALL', hash)
  local seated, latest = false, nil
  for i = 1, #entries, 2 do
    local field, value = entries[i], entries[i + 1]
    local node = string.match(field, '^%d+:(.+)$')
    if node then
      seated = true
      if alive(node) and (tonumber(value) or 0) > 0 then return true end
    elseif string.match(field, '^gone:%d+$') then
      local gone = tonumber(value)
      if gone and (latest == nil or gone > latest) then latest = gone end
    end
  end
  if latest == nil then return not seated end
  return latest >= since_ms
end

-- The owner's unfinished AI rooms: counted, unfinished, playing ids, idle ids, stale ids.
-- counted: those the human is playing (see above); unfinished: those still in the lobby
-- set; playing, idle: up to ``listed`` ids of the counted ones and of the others (oldest
-- first); stale: members no longer in the lobby set (for the caller to drop if it writes).
local function ai_games_count(games, live, presence_of, alive, now, grace_ms, listed)
  local since_ms = now - tonumber(grace_ms)
  listed = tonumber(listed)
  local counted, total, shown, idle, stale = 0, 0, {}, {}, {}
  for _, id in ipairs(redis.call('ZRANGE', games, 0, -1)) do
    if redis.call('ZSCORE', live, id) then
      total = total + 1
      if ai_game_playing(presence_of(id), since_ms, alive) then
        counted = counted + 1
        if #shown < listed then shown[#shown + 1] = id end
      elseif #idle < listed then
        idle[#idle + 1] = id
      end
    else
      stale[#stale + 1] = id
    end
  end
  return counted, total, shown, idle, stale
end

-- presence_of for a single Redis: the room's presence key, built from room_prefix.
local function ai_games_presence_built(room_prefix)
  return function(id) return room_prefix .. '{' .. id .. '}:presence' end
end

-- presence_of for a Redis Cluster: the presence keys handed in KEYS[first ...], by the
-- room id in each (kibitz:{gN}:room:ID:presence).
local function ai_games_presence_handed(first)
  local by_id = {}
  for i = first, #KEYS do
    local id = string.match(KEYS[i], ':room:(.+):presence$')
    if id then by_id[id] = KEYS[i] end
  end
  return function(id) return by_id[id] end
end
