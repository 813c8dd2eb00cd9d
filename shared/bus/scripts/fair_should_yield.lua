-- Whether a search of this owner should stop early to free its worker for a waiting
-- job whose owner has nothing running (see kibitz.shared.bus.fair_queue).
--
--   KEYS[1]  ai_ready      sorted set: job id -> start tag
--   KEYS[2]  ai_waiting    hash: job id -> job JSON
--   KEYS[3]  jobs          the jobs stream (what runs now)
--   KEYS[4]  ai_workers    sorted set: live worker -> last beat (ms)
--   ARGV[1]  lane          the searching job's owner lane
--   ARGV[2]  scan          ready jobs looked at, at most
--   ARGV[3]  yield_prefix  the marker of waiting job J is yield_prefix .. J
--   ARGV[4]  mark_ms       the marker's lifetime
--   KEYS[5]  ai_yielded    a Redis Cluster only: the markers in one sorted set (job id ->
--                          expiry, ms; expired ones pruned), a key the script is handed;
--                          yield_prefix is not used then. On a single Redis the marker is
--                          a string key of its own (yield_prefix .. job id, a TTL), a key
--                          known only here, which a single Redis lets a script write.
--
-- Returns 1 (and claims the newcomer, so only one search yields for it) or 0.

local ready, waiting, jobs, workers = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local mine, scan, yield_prefix, mark_ms = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local RUNNING_SCAN = 256  -- stream entries read to learn who runs (the stream holds one per worker)

local function lane_of(job)
  local ok, data = pcall(cjson.decode, job or '')
  if not ok or type(data) ~= 'table' then return nil end
  local owner = data['owner']
  if type(owner) ~= 'string' or owner == '' then owner = 'room:' .. tostring(data['room']) end
  return owner
end
local window = math.max(1, redis.call('ZCARD', workers))
if redis.call('XLEN', jobs) < window then return 0 end
local running = {}
for _, entry in ipairs(redis.call('XRANGE', jobs, '-', '+', 'COUNT', RUNNING_SCAN)) do
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'job' then
      local lane = lane_of(fields[i + 1])
      if lane then running[lane] = (running[lane] or 0) + 1 end
    end
  end
end
local backlogged = (running[mine] or 0) >= 2
local newcomer = nil
for _, id in ipairs(redis.call('ZRANGE', ready, 0, tonumber(scan) - 1)) do
  local lane = lane_of(redis.call('HGET', waiting, id))
  if lane == mine then backlogged = true end
  if lane and not running[lane] and not newcomer then newcomer = id end
end
if not backlogged or not newcomer then return 0 end
if KEYS[5] then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  if redis.call('ZSCORE', KEYS[5], newcomer) then return 0 end
  redis.call('ZADD', KEYS[5], now + tonumber(mark_ms), newcomer)
  redis.call('PEXPIRE', KEYS[5], mark_ms)
  return 1
end
if redis.call('SET', yield_prefix .. newcomer, mine, 'NX', 'PX', mark_ms) then return 1 end
return 0
