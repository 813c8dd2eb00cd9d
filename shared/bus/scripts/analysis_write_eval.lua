-- Store one position's evaluation of an analysis, once (a position computed twice is
-- stored once), and finish its job (acknowledged and deleted, in the same step); the
-- write that completes the set queues the game's id for a node to collect.
-- (shared/bus/analysis.py, AnalysisJobs.write_eval)
--
-- KEYS[1]  the analysis's state hash (keys.analysis_key)
-- KEYS[2]  its evaluations hash, ply -> evaluation JSON (keys.analysis_evals_key)
-- KEYS[3]  the stream of complete analyses (keys.ANALYSIS_FINISHED)
-- KEYS[4]  the analysis jobs stream (keys.ANALYSIS_JOBS)
-- ARGV[1]  the position's ply
-- ARGV[2]  its evaluation (JSON)
-- ARGV[3]  the state's lifetime (ms), renewed by each write
-- ARGV[4]  the game's id
-- ARGV[5]  the most entries KEYS[3] keeps (approximate trim)
-- ARGV[6]  the workers' consumer group on KEYS[4]
-- ARGV[7]  the job's entry id in KEYS[4]
--
-- Returns 1 when stored, 0 when it was there already, -1 when the analysis is gone.
redis.call('XACK', KEYS[4], ARGV[6], ARGV[7])
redis.call('XDEL', KEYS[4], ARGV[7])
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local stored = redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
local ttl = tonumber(ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
if redis.call('HGET', KEYS[1], 'status') == 'queued' then
  redis.call('HSET', KEYS[1], 'status', 'running')
end
local total = tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
if redis.call('HLEN', KEYS[2]) >= total and redis.call('HSETNX', KEYS[1], 'finished', '1') == 1 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'analysis', ARGV[4])
end
return stored
