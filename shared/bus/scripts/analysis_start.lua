-- Start the analysis of a finished game: its state and one job per position, at once;
-- unless one is under way already, or too many are (in all, or from one address).
-- (shared/bus/analysis.py, AnalysisStore.start)
--
-- KEYS[1]  the analysis's state hash (keys.analysis_key)
-- KEYS[2]  the analysis jobs stream (keys.ANALYSIS_JOBS)
-- KEYS[3]  the analyses under way, id -> start time (keys.ANALYSIS_ACTIVE)
-- ARGV[1]  the game's id
-- ARGV[2]  now (ms)
-- ARGV[3]  the state's lifetime (ms); entries of KEYS[3] older than it are pruned
-- ARGV[4]  the most analyses under way at once
-- ARGV[5]  the positions to evaluate (jobs: plies 0 .. ARGV[5] - 1)
-- ARGV[6]  the game's name
-- ARGV[7]  its start position
-- ARGV[8]  its moves (JSON list of move texts)
-- ARGV[9]  the address that asks
-- ARGV[10] the most analyses under way from one address
-- ARGV[11] the state key prefix (keys.analysis_key(""))
-- ARGV[12] cluster: "1" on a Redis Cluster, KEYS[4...] being the state hash of each
--          analysis under way as the caller read KEYS[3] just before (all on the control
--          slot); only these are read, and an id under way that is not among them counts
--          as the address's (a count is never low). On a single Redis each state hash is
--          built from ARGV[11]: keys not handed, which a single Redis allows.
--
-- Returns {1} (started), {0, status} (one exists already), {-1} (too many in all) or
-- {-2} (too many from the address).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('HGET', KEYS[1], 'status') or 'queued'}
end
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - ttl)
local active = redis.call('ZRANGE', KEYS[3], 0, -1)
if #active >= tonumber(ARGV[4]) then return {-1} end
local mine = 0
local handed = nil
if ARGV[12] == '1' then
  handed = {}
  for i = 4, #KEYS do handed[KEYS[i]] = true end
end
for _, id in ipairs(active) do
  local state = ARGV[11] .. id
  if handed and not handed[state] then
    mine = mine + 1
  elseif redis.call('HGET', state, 'address') == ARGV[9] then
    mine = mine + 1
  end
end
if mine >= tonumber(ARGV[10]) then return {-2} end
redis.call('HSET', KEYS[1], 'game', ARGV[6], 'start', ARGV[7], 'moves', ARGV[8],
           'total', ARGV[5], 'status', 'queued', 'created_ms', ARGV[2], 'address', ARGV[9])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[3], now, ARGV[1])
for ply = 0, tonumber(ARGV[5]) - 1 do
  redis.call('XADD', KEYS[2], '*', 'analysis', ARGV[1], 'ply', ply)
end
return {1}
