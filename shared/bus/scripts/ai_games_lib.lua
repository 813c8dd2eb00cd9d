-- The games against the AI a person is actually playing (a library: the commit uses it
-- before a new AI room is written). It reads the presence hashes presence_lib.lua keeps.
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
-- Known exception to "every key a script touches is in KEYS": ai_games_count reads the
-- presence hash of each of the owner's rooms (room_prefix .. '{' .. id .. '}:presence')
-- and the heartbeat keys of the nodes named there. The set is bounded
-- (ai_games_kept), so the reads are. A single Redis server allows it; the cluster issue
-- replaces it.

-- Whether the human of the room whose presence hash is ``hash`` is still playing (see
-- above). ``live``: node -> whether its heartbeat is there, filled as nodes are met.
local function ai_game_playing(hash, node_prefix, since_ms, live)
  local entries = redis.call('HGETALL', hash)
  local seated, latest = false, nil
  for i = 1, #entries, 2 do
    local field, value = entries[i], entries[i + 1]
    local node = string.match(field, '^%d+:(.+)$')
    if node then
      seated = true
      if live[node] == nil then live[node] = redis.call('EXISTS', node_prefix .. node) == 1 end
      if live[node] and (tonumber(value) or 0) > 0 then return true end
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
local function ai_games_count(games, live, room_prefix, node_prefix, now, grace_ms, listed)
  local since_ms = now - tonumber(grace_ms)
  listed = tonumber(listed)
  local counted, total, shown, idle, stale, nodes = 0, 0, {}, {}, {}, {}
  for _, id in ipairs(redis.call('ZRANGE', games, 0, -1)) do
    if redis.call('ZSCORE', live, id) then
      total = total + 1
      local hash = room_prefix .. '{' .. id .. '}:presence'
      if ai_game_playing(hash, node_prefix, since_ms, nodes) then
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
