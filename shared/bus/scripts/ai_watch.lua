-- The AI-turn watchdog's step on a due room (after fair_lib.lua): queue the AI's job again
-- and push the room's deadline out, or only push it out, in one atomic step that checks
-- the room is still as the caller judged it. (shared/bus/store.py, RoomStore.watch_ai_job;
-- the decision: server/domain/ai_watch.py.)
--
--   KEYS[1]   room          the room's hash (version, data, ai_watch)
--   KEYS[2]   deadlines     the room's deadlines set (its group's, on a Redis Cluster)
-- On a single Redis (ARGV[16] ""):
--   KEYS[3]   jobs          the jobs stream
--   KEYS[4]   ai_ready      the fair queue: job id -> start tag
--   KEYS[5]   ai_waiting    the fair queue: job id -> job JSON
--   KEYS[6]   ai_owners     the fair queue: owner -> finish tag
--   KEYS[7]   ai_clock      the fair queue's virtual clock
--   KEYS[8]   ai_workers    live workers -> last beat (ms)
-- On a Redis Cluster (ARGV[16] "1"), every key in the room's slot:
--   KEYS[3]   ai_outbox     the room group's outbox (the node relays the entry at once)
--
--   ARGV[1]   room_id
--   ARGV[2]   version        the version the caller judged (the AI's turn)
--   ARGV[3]   seen           the room's ai_watch field as the caller read it ("": none)
--   ARGV[4]   due_by         the room's deadline must still be at or before this (ms)
--   ARGV[5]   deadline_ms    the room's new deadline ("": off the deadlines set)
--   ARGV[6]   mark           the new ai_watch field ("version:attempt"), written when the
--                            job is queued
--   ARGV[7]   job            the job JSON ("": no job, only the deadline)
--   ARGV[8]   job_id
--   ARGV[9]   job_lane
--   ARGV[10]  job_cost_ms
--   ARGV[11]  max_waiting    jobs in the fair queue, at most
--   ARGV[12]  max_lead_ms
--   ARGV[13]  worker_ttl_ms
--   ARGV[14]  room_prefix    a room's key is room_prefix .. '{' .. id .. '}' (dispatch)
--   ARGV[15]  dispatch_scan
--   ARGV[16]  cluster        "1" on a Redis Cluster, else ""
--   ARGV[17]  outbox_kept    a Redis Cluster: jobs the outbox holds, at most
--
-- Nothing is written unless the room is at ``version``, its ai_watch field is ``seen``
-- and its deadline is due by ``due_by``: another node's step, or a commit, came first
-- otherwise (so two sweepers never queue the same attempt twice, and a commit's deadline
-- is never overwritten). A queue (or outbox) that is full gets no job: the deadline is
-- pushed out all the same and the attempt is not counted.
--
-- Returns {0, ""} nothing written; {1, entry} queued (entry: the outbox entry's id on a
-- Redis Cluster, else ""); {2, ""} the deadline alone moved; {-2, ""} the queue is full
-- (the deadline alone moved).

local room, deadlines = KEYS[1], KEYS[2]
local room_id, version, seen, due_by = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local deadline_ms, mark = ARGV[5], ARGV[6]
local job, job_id, job_lane, job_cost_ms = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local max_waiting, max_lead_ms, worker_ttl_ms = ARGV[11], ARGV[12], ARGV[13]
local room_prefix, dispatch_scan = ARGV[14], ARGV[15]
local cluster, outbox_kept = ARGV[16] == '1', ARGV[17]

if redis.call('HGET', room, 'version') ~= version then return {0, ''} end
if (redis.call('HGET', room, 'ai_watch') or '') ~= seen then return {0, ''} end
local score = redis.call('ZSCORE', deadlines, room_id)
if (not score) or tonumber(score) > tonumber(due_by) then return {0, ''} end

local status, entry = 2, ''
if job ~= '' then
  if cluster then
    local outbox = KEYS[3]
    if redis.call('XLEN', outbox) >= tonumber(outbox_kept) then
      status = -2
    else
      entry = redis.call('XADD', outbox, 'MAXLEN', '~', outbox_kept, '*', 'job', job,
                         'id', job_id, 'lane', job_lane, 'cost', job_cost_ms)
      status = 1
    end
  else
    local jobs, ai_ready, ai_waiting, ai_owners = KEYS[3], KEYS[4], KEYS[5], KEYS[6]
    local ai_clock, ai_workers = KEYS[7], KEYS[8]
    if not fair_has_room(ai_waiting, job_id, max_waiting) then
      status = -2
    else
      fair_enqueue(ai_ready, ai_waiting, ai_owners, ai_clock, job_lane, job_id, job,
                   job_cost_ms, max_lead_ms)
      fair_dispatch(ai_ready, ai_waiting, ai_clock, jobs, ai_workers, fair_now(),
                    worker_ttl_ms, room_prefix, dispatch_scan)
      status = 1
    end
  end
  if status == 1 then redis.call('HSET', room, 'ai_watch', mark) end
end
if deadline_ms == '' then
  redis.call('ZREM', deadlines, room_id)
else
  redis.call('ZADD', deadlines, deadline_ms, room_id)
end
return {status, entry}
