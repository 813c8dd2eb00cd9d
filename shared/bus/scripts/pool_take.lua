-- Take two entries out of the pools together, to pair them: of nodes pairing at once,
-- exactly one gets a given entry. (shared/bus/pool.py, PoolBoard.take)
--
-- KEYS[1]  the pool hash (entry id -> entry JSON)
-- ARGV[1]  the first entry's id
-- ARGV[2]  the second entry's id
-- ARGV[3]  the node heartbeat key prefix (keys.NODES)
--
-- Returns {1, first JSON, second JSON} when both were there with live nodes (both are
-- removed: the caller makes their room); else {0} and nothing is taken (an entry of a dead
-- node is removed).
--
-- Known exception for the cluster issue: this script reads keys it is not handed, the
-- heartbeat keys ARGV[3] .. entry['node'] of the two entries' nodes.
if ARGV[1] == ARGV[2] then return {0} end
local found, missing = {}, false
for i = 1, 2 do
  local data = redis.call('HGET', KEYS[1], ARGV[i])
  if not data then
    missing = true
  else
    local ok, entry = pcall(cjson.decode, data)
    if not ok or type(entry) ~= 'table' or type(entry['node']) ~= 'string'
       or redis.call('EXISTS', ARGV[3] .. entry['node']) == 0 then
      redis.call('HDEL', KEYS[1], ARGV[i])
      missing = true
    end
    found[i] = data
  end
end
if missing then return {0} end
redis.call('HDEL', KEYS[1], ARGV[1], ARGV[2])
return {1, found[1], found[2]}
