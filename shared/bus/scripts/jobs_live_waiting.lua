-- How many live jobs wait in the stream with no worker on them yet (the stream holds
-- only unfinished jobs: done ones are deleted). (shared/bus/jobs.py,
-- WorkerBus.live_jobs_waiting)
--
-- KEYS[1]  the jobs stream (keys.JOBS)
-- ARGV[1]  the workers' consumer group
local pending = redis.call('XPENDING', KEYS[1], ARGV[1])
return redis.call('XLEN', KEYS[1]) - tonumber(pending[1])
