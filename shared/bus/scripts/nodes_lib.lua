-- Whether a server node is alive (a library: joined before the scripts that use it).
--
-- ``nodes`` says how to tell, as the caller passes it in ARGV:
-- - on a single Redis, the heartbeat key prefix (keys.NODES): node N is alive while the
--   key nodes .. N exists (it has the heartbeat's TTL);
-- - on a Redis Cluster, '@' .. ttl_ms: node N is alive while its score in the sorted set
--   ``beats`` (node -> last heartbeat, ms) is at least now - ttl_ms. ``beats`` is a key the
--   script is handed in KEYS: keys.NODE_BEATS on the control slot, or the room group's
--   copy (keys.group_node_beats), so every key the script reads is declared.
--
-- nodes_alive(nodes, beats) returns a function node -> true/false that asks Redis once
-- per node (it remembers the answers). nodes_sharded(nodes): whether ``nodes`` is the
-- Redis Cluster form (the presence scripts publish with SPUBLISH then).

local function nodes_alive(nodes, beats)
  local known = {}
  local since = nil
  if string.sub(nodes, 1, 1) == '@' then
    local t = redis.call('TIME')
    since = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      - tonumber(string.sub(nodes, 2))
  end
  return function(node)
    local alive = known[node]
    if alive == nil then
      if since then
        local score = redis.call('ZSCORE', beats, node)
        alive = (score and tonumber(score) >= since) and true or false
      else
        alive = redis.call('EXISTS', nodes .. node) == 1
      end
      known[node] = alive
    end
    return alive
  end
end

local function nodes_sharded(nodes)
  return string.sub(nodes, 1, 1) == '@'
end

-- Publish ``message`` on ``channel``: with SPUBLISH when ``sharded`` (true or '1': a
-- Redis Cluster, where the channel is its slot's and only that slot's nodes carry it; the
-- channel shares the slot of a key the script is handed), else with PUBLISH.
local function nodes_publish(sharded, channel, message)
  if sharded == true or sharded == '1' then
    return redis.call('SPUBLISH', channel, message)
  end
  return redis.call('PUBLISH', channel, message)
end
