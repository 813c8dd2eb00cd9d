-- Take a connection's entries out of the pools. (shared/bus/pool.py, PoolBoard.leave)
--
-- KEYS[1]     the pool hash (entry id -> entry JSON)
-- ARGV[1]     the connection id
-- ARGV[2...]  the entry ids
--
-- Removes those of the ids that belong to that connection (others' entries stay; an
-- entry already paired is gone). Returns how many were removed.
local removed = 0
for i = 2, #ARGV do
  local data = redis.call('HGET', KEYS[1], ARGV[i])
  if data then
    local ok, entry = pcall(cjson.decode, data)
    if ok and type(entry) == 'table' and entry['conn'] == ARGV[1] then
      redis.call('HDEL', KEYS[1], ARGV[i])
      removed = removed + 1
    end
  end
end
return removed
