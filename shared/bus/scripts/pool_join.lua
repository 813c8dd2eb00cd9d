-- Put one player into a quick pairing pool, unless a bound says no.
-- (shared/bus/pool.py, PoolBoard.join; after nodes_lib.lua)
--
-- KEYS[1]  the pool hash (entry id -> entry JSON, every pool's entries)
-- KEYS[2]  a Redis Cluster only: the node beats (keys.NODE_BEATS, the control slot's)
-- ARGV[1]  the new entry's id
-- ARGV[2]  the new entry (JSON with its pool, node, connection and address)
-- ARGV[3]  the player's address
-- ARGV[4]  the pool's name
-- ARGV[5]  the player's connection id
-- ARGV[6]  the most entries one address may have (all pools, all nodes)
-- ARGV[7]  the most entries one pool may have
-- ARGV[8]  the most entries of all pools together
-- ARGV[9]  how live nodes are told (nodes_lib.lua): keys.NODES, or '@' .. ttl_ms
-- ARGV[10] the player's id (an account's player id, a guest's from its key); '' for a
--          guest without a key (known by its connection only)
--
-- Prunes the entries of dead nodes (and any entry that is not one), then counts. Returns
-- {status, players waiting in that pool}: status 1 joined; -1 the address has too many
-- entries; -2 the pool is full; -3 the connection, or the player (another tab, another
-- node), is in a pool already; -4 all pools are full. Refused, nothing changes but the
-- pruning.
local live = nodes_alive(ARGV[9], KEYS[2])
local by_address, in_pool, total, already = 0, 0, 0, false
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local ok, entry = pcall(cjson.decode, entries[i + 1])
  if not ok or type(entry) ~= 'table' or type(entry['node']) ~= 'string'
     or not live(entry['node']) then
    redis.call('HDEL', KEYS[1], entries[i])
  else
    total = total + 1
    if entry['address'] == ARGV[3] then by_address = by_address + 1 end
    if entry['pool'] == ARGV[4] then in_pool = in_pool + 1 end
    if entry['conn'] == ARGV[5] then already = true end
    if ARGV[10] ~= '' and entry['player'] == ARGV[10] then already = true end
  end
end
if already then return {-3, in_pool} end
if by_address >= tonumber(ARGV[6]) then return {-1, in_pool} end
if in_pool >= tonumber(ARGV[7]) then return {-2, in_pool} end
if total >= tonumber(ARGV[8]) then return {-4, in_pool} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {1, in_pool + 1}
