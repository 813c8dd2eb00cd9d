-- Renew a worker's lease on the job it searches, and read the job's room version.
-- (shared/bus/jobs.py, WorkerBus.renew_lease)
--
-- KEYS[1]  the jobs stream (keys.JOBS)
-- KEYS[2]  the job's room (keys.room_key); not handed on a Redis Cluster (another slot:
--          the caller reads the version with its own HGET), the version is -1 then
-- ARGV[1]  the workers' consumer group
-- ARGV[2]  this worker (its consumer name)
-- ARGV[3]  the job's entry id
--
-- Resets the entry's idle time if this worker still owns it (JUSTID: no delivery is
-- counted). Returns {owned 1/0, the room's version or -1}.
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
local version = -1
if KEYS[2] then version = tonumber(redis.call('HGET', KEYS[2], 'version') or '-1') end
if #pending == 0 or pending[1][2] ~= ARGV[2] then return {0, version} end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return {1, version}
