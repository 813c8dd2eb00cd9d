-- Relay AI jobs from a slot group's outbox to the fair queue, each once, and admit what
-- the workers can take now (a Redis Cluster only; after fair_lib.lua). Every key is on
-- the control slot. (shared/bus/store.py, RoomStore.relay)
--
--   KEYS[1]  ai_ready      sorted set: job id -> start tag
--   KEYS[2]  ai_waiting    hash: job id -> job JSON
--   KEYS[3]  ai_owners     sorted set: owner -> finish tag
--   KEYS[4]  ai_clock      the virtual clock
--   KEYS[5]  jobs          the jobs stream
--   KEYS[6]  ai_workers    sorted set: live worker -> last beat (ms)
--   KEYS[7]  ai_relayed    sorted set: outbox entry ("group/entry id") -> when relayed (ms)
--   ARGV[1]  max_lead_ms   an owner's tags run at most this far ahead of the clock
--   ARGV[2]  worker_ttl_ms a worker silent this long is not counted
--   ARGV[3]  scan          ready jobs one dispatch looks at, at most
--   ARGV[4]  keep_ms       how long a relayed entry is remembered
--   ARGV[5]  most          relayed entries remembered, at most
--   ARGV[6...]             the entries: "group/entry id", job id, job JSON, lane, cost
--                          (ms), for each
--
-- An entry relayed twice (by its node and by the sweeper, or again after it could not be
-- deleted from its outbox) is queued once (fair_relay in fair_lib.lua). Dispatch reads no
-- room (fair_lib.lua).
--
-- Returns {queued, duplicates, sent, dropped, waiting jobs}.

local ready, waiting, owners, clock = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local jobs, workers, relayed = KEYS[5], KEYS[6], KEYS[7]
local max_lead_ms, worker_ttl_ms, scan = ARGV[1], ARGV[2], ARGV[3]
local keep_ms, most = ARGV[4], ARGV[5]

local entries = {}
for i = 6, #ARGV do entries[#entries + 1] = ARGV[i] end
local now = fair_now()
local relay = fair_relay(ready, waiting, owners, clock, relayed, now, max_lead_ms, keep_ms,
                         most, entries)
local dispatched = fair_dispatch(ready, waiting, clock, jobs, workers, now, worker_ttl_ms, '',
                                 scan)
return {relay[1], relay[2], dispatched[1], dispatched[2], redis.call('HLEN', waiting)}
