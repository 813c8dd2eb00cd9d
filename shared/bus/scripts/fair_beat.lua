-- A worker counts itself in (or refreshes its beat), and the workers that stopped
-- beating are pruned (after fair_lib.lua).
--
--   KEYS[1]  ai_workers     sorted set: live worker -> last beat (ms)
--   ARGV[1]  worker         the worker's name
--   ARGV[2]  worker_ttl_ms  a worker silent this long is not counted
--
-- Returns the number of live workers.

local workers = KEYS[1]
local worker, worker_ttl_ms = ARGV[1], ARGV[2]

local now = fair_now()
redis.call('ZADD', workers, now, worker)
redis.call('ZREMRANGEBYSCORE', workers, '-inf', now - tonumber(worker_ttl_ms))
return redis.call('ZCARD', workers)
