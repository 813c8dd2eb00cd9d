-- The entries of the pools whose nodes are alive, pruning the others.
-- (shared/bus/pool.py, PoolBoard.live; after nodes_lib.lua)
--
-- KEYS[1]  the pool hash (entry id -> entry JSON)
-- KEYS[2]  a Redis Cluster only: the node beats (keys.NODE_BEATS, the control slot's)
-- ARGV[1]  how live nodes are told (nodes_lib.lua): keys.NODES, or '@' .. ttl_ms
--
-- Returns the JSON of every live entry, in no order. An entry whose node's heartbeat is
-- gone, or that is not an entry, is removed. (The hash is bounded by PoolBoard.join's
-- limits.)
local alive = nodes_alive(ARGV[1], KEYS[2])
local out = {}
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local ok, entry = pcall(cjson.decode, entries[i + 1])
  local node = ok and type(entry) == 'table' and entry['node']
  if type(node) == 'string' and alive(node) then
    out[#out + 1] = entries[i + 1]
  else
    redis.call('HDEL', KEYS[1], entries[i])
  end
end
return out
