-- Admit waiting AI jobs into the jobs stream up to the window (after fair_lib.lua).
--
--   KEYS[1]  ai_ready     sorted set: job id -> start tag
--   KEYS[2]  ai_waiting   hash: job id -> job JSON
--   KEYS[3]  ai_clock     the virtual clock
--   KEYS[4]  jobs         the jobs stream
--   KEYS[5]  ai_workers   sorted set: live worker -> last beat (ms)
--   ARGV[1]  worker_ttl_ms  a worker silent this long is not counted
--   ARGV[2]  room_prefix    a room's key is room_prefix .. '{' .. id .. '}'
--   ARGV[3]  scan           ready jobs looked at, at most
--
-- Returns {sent, dropped}.

local ready, waiting, clock, jobs, workers = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local worker_ttl_ms, room_prefix, scan = ARGV[1], ARGV[2], ARGV[3]

return fair_dispatch(ready, waiting, clock, jobs, workers, fair_now(), worker_ttl_ms,
                     room_prefix, scan)
