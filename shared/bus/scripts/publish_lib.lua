-- Publishing a snapshot with who is there (a library, after nodes_lib.lua and presence_lib.lua).
--
-- publish_presence publishes a snapshot (its three parts, see presence_splice) with who
-- is there now, if the room is still at the version it was made from. Returns {1,
-- version, connected 0, connected 1, spectators, gone 0, gone 1}, or {0, current version
-- or -1} if the room moved on (or is gone).

local function publish_presence(room, hash, version, node_prefix, flags, head, s0, s1, chan)
  local current = redis.call('HGET', room, 'version')
  if (not current) or tonumber(current) ~= tonumber(version) then
    return {0, tonumber(current or -1)}
  end
  local snapshot, present = presence_splice(hash, room, node_prefix, flags, head, s0, s1)
  nodes_publish(nodes_sharded(node_prefix), chan, snapshot)
  return {1, tonumber(current), present[1], present[2], present[3], present[4], present[5]}
end
