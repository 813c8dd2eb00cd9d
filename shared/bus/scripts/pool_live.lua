-- The entries of the pools whose nodes are alive, pruning the others.
-- (shared/bus/pool.py, PoolBoard.live)
--
-- KEYS[1]  the pool hash (entry id -> entry JSON)
-- ARGV[1]  the node heartbeat key prefix (keys.NODES)
--
-- Returns the JSON of every live entry, in no order. An entry whose node's heartbeat is
-- gone, or that is not an entry, is removed. (The hash is bounded by PoolBoard.join's
-- limits.)
--
-- Known exception for the cluster issue: this script reads keys it is not handed, the
-- heartbeat keys ARGV[1] .. entry['node'] of the entries' nodes.
local alive = {}
local out = {}
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local ok, entry = pcall(cjson.decode, entries[i + 1])
  local node = ok and type(entry) == 'table' and entry['node']
  if type(node) == 'string' and alive[node] == nil then
    alive[node] = redis.call('EXISTS', ARGV[1] .. node) == 1
  end
  if type(node) == 'string' and alive[node] then
    out[#out + 1] = entries[i + 1]
  else
    redis.call('HDEL', KEYS[1], entries[i])
  end
end
return out
