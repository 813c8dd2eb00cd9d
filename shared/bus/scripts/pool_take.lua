-- Take two entries out of the pools together, to pair them: of nodes pairing at once,
-- exactly one gets a given entry. (shared/bus/pool.py, PoolBoard.take; after nodes_lib.lua)
--
-- KEYS[1]  the pool hash (entry id -> entry JSON)
-- KEYS[2]  a Redis Cluster only: the node beats (keys.NODE_BEATS, the control slot's)
-- ARGV[1]  the first entry's id
-- ARGV[2]  the second entry's id
-- ARGV[3]  how live nodes are told (nodes_lib.lua): keys.NODES, or '@' .. ttl_ms
--
-- Returns {1, first JSON, second JSON} when both were there with live nodes (both are
-- removed: the caller makes their room); else {0} and nothing is taken (an entry of a dead
-- node is removed).
if ARGV[1] == ARGV[2] then return {0} end
local alive = nodes_alive(ARGV[3], KEYS[2])
local found, missing = {}, false
for i = 1, 2 do
  local data = redis.call('HGET', KEYS[1], ARGV[i])
  if not data then
    missing = true
  else
    local ok, entry = pcall(cjson.decode, data)
    if not ok or type(entry) ~= 'table' or type(entry['node']) ~= 'string'
       or not alive(entry['node']) then
      redis.call('HDEL', KEYS[1], ARGV[i])
      missing = true
    end
    found[i] = data
  end
end
if missing then return {0} end
redis.call('HDEL', KEYS[1], ARGV[1], ARGV[2])
return {1, found[1], found[2]}
