-- The room commit: every write to a room, in one atomic step (after fair_lib.lua,
-- nodes_lib.lua, presence_lib.lua and ai_games_lib.lua). Built by
-- kibitz.shared.bus.store.RoomStore.commit_plan, which names each KEYS and ARGV entry as
-- below (same names, same order: CommitKeys, ClusterCommitKeys, CommitArgs).
--
-- On a single Redis (ARGV[35] ""):
--   KEYS[1]   room             the room's record (hash: version, data, archive)
--   KEYS[2]   events           the room's event stream
--   KEYS[3]   presence         the room's presence hash
--   KEYS[4]   chat_players     the room's players' chat
--   KEYS[5]   chat_spectators  the room's spectators' chat
--   (the keys above share the room's hash tag; the ones below are global)
--   KEYS[6]   live             sorted set: unfinished rooms by last update (the lobby)
--   KEYS[7]   deadlines        sorted set: room -> its clock's next deadline (ms)
--   KEYS[8]   archive          the archive stream
--   KEYS[9]   jobs             the jobs stream
--   KEYS[10]  ai_ready         the fair queue: job id -> start tag
--   KEYS[11]  ai_waiting       the fair queue: job id -> job JSON
--   KEYS[12]  ai_owners        the fair queue: owner -> finish tag
--   KEYS[13]  ai_clock         the fair queue's virtual clock
--   KEYS[14]  ai_workers       live workers -> last beat (ms)
--   KEYS[15]  ai_games         the owner's unfinished AI games
--
-- On a Redis Cluster (ARGV[35] "1") every key is in the room's slot (its slot group's
-- tag); C[i] is KEYS[i] there:
--   C[1]      room             (C[1] to C[5]: the room's keys, as above)
--   C[2]      events
--   C[3]      presence
--   C[4]      chat_players
--   C[5]      chat_spectators
--   C[6]      live             the group's unfinished rooms (the lobby merges the groups)
--   C[7]      deadlines        the group's clock deadlines
--   C[8]      archive          the group's archive stream
--   C[9]      ai_outbox        the group's AI jobs on their way to the fair queue (stream)
--   C[10]     node_beats       the group's copy of the node beats (node -> last beat, ms)
--   C[11]     ai_games         the owner's unfinished AI games in this group
--   C[12...]  presence_keys    a "create" only: the presence hash of each room that set
--                              held when the caller read it (ai_games_lib.lua)
--   and the AI job is not queued here: it is added to ai_outbox (fields job, id, lane,
--   cost), which the node relays to the fair queue on the control slot at once
--   (ai_relay.lua; a sweeper relays what a dead node left); the snapshot goes out with
--   SPUBLISH; node_prefix is '@' .. the node TTL (ms); the room prefix and the fair queue's
--   bounds are not used. The per-owner AI game cap counts every group: the caller counts
--   the other groups' games just before (ai_games_count.lua, under a short per-owner
--   lock) and hands their totals in ARGV[37], ARGV[38].
--
--   ARGV[1]   expected_version  the version the change was made from (-1: must not exist)
--   ARGV[2]   version           the new version
--   ARGV[3]   record            the room record (JSON)
--   ARGV[4]   event             the event entry (JSON)
--   ARGV[5]   updated_ms        when the room changed (the event's time, the lobby's score)
--   ARGV[6]   room_id
--   ARGV[7]   channel           the room's pub/sub channel
--   ARGV[8]   status            "waiting", "playing" or "over"
--   ARGV[9]   live              "1": unfinished (in the lobby), "0": over
--   ARGV[10]  archive           "1": a finished room goes to the archive, "0": not (aborted)
--   ARGV[11]  waiting_ttl_ms    how long a waiting room lives
--   ARGV[12]  finished_ttl_ms   how long a finished room stays once archived
--   ARGV[13]  deadline_ms       the room's clock deadline ("": none)
--   ARGV[14]  events_kept       the event stream's length bound
--   ARGV[15]  node_prefix       the heartbeat key of node N is node_prefix .. N
--   ARGV[16]  seat_flags        one letter a seat (see presence_splice)
--   ARGV[17]  head              the snapshot's parts (see presence_splice)
--   ARGV[18]  seat0
--   ARGV[19]  seat1
--   ARGV[20]  ai_games_mode     "" (no AI seat or no owner), "create", "touch" or "end"
--   ARGV[21]  ai_games_limit    AI games an owner may be playing, at most
--   ARGV[22]  ai_games_ttl_ms   the owner's set of AI games lives this long after a commit
--   ARGV[23]  job               the AI job (JSON; "": none)
--   ARGV[24]  job_id
--   ARGV[25]  job_lane          the job owner's lane in the fair queue
--   ARGV[26]  job_cost_ms       the job's expected cost
--   ARGV[27]  max_waiting       jobs in the fair queue, at most
--   ARGV[28]  max_lead_ms       an owner's tags run at most this far ahead of the clock
--   ARGV[29]  worker_ttl_ms     a worker silent this long is not counted
--   ARGV[30]  room_prefix       a room's key is room_prefix .. '{' .. id .. '}'
--   ARGV[31]  dispatch_scan     ready jobs one dispatch looks at, at most
--   ARGV[32]  ai_games_grace_ms an AI game whose human has been gone this long stops counting
--   ARGV[33]  ai_games_kept     an owner's unfinished AI games in all (counted or not), at most
--   ARGV[34]  ai_games_listed   room ids a refusal names, at most
--   ARGV[35]  cluster           "1" on a Redis Cluster (the key layout above), else ""
--   ARGV[36]  outbox_kept       a Redis Cluster: jobs the outbox holds, at most (a commit
--                               that would add more is refused as a full queue)
--   ARGV[37]  others_counted    a Redis Cluster: the owner's AI games played in other groups
--   ARGV[38]  others_unfinished a Redis Cluster: its unfinished ones in other groups
--
-- Returns {1, version, connected 0, connected 1, spectators, gone 0, gone 1} committed
-- (who is there, as published: the snapshot on the channel is spliced together here, so
-- presence costs no round trip of its own); {0, current version} stale; {-1, AI games
-- counted, AI games unfinished, room id, ...} over the owner's AI game limit (or past the
-- games kept: ai_games_lib.lua); {-2, waiting jobs} the AI queue is full. Only {1, ...}
-- writes. On a Redis Cluster {1, ...} ends with the outbox entry's id ("" without a job),
-- and the AI game counts of {-1, ...} are this group's.

local cluster = ARGV[35] == '1'
local room, events, presence = KEYS[1], KEYS[2], KEYS[3]
local chat_players, chat_spectators = KEYS[4], KEYS[5]
local live, deadlines, archive = KEYS[6], KEYS[7], KEYS[8]
local jobs, ai_ready, ai_waiting, ai_owners, ai_clock, ai_workers, ai_games
local ai_outbox
if cluster then
  ai_outbox, presence_beats, ai_games = KEYS[9], KEYS[10], KEYS[11]
else
  jobs, ai_ready, ai_waiting, ai_owners = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
  ai_clock, ai_workers, ai_games = KEYS[13], KEYS[14], KEYS[15]
end

local expected_version, version, record, event = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local updated_ms, room_id, channel, status = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local is_live, to_archive, waiting_ttl_ms, finished_ttl_ms = ARGV[9], ARGV[10], ARGV[11], ARGV[12]
local deadline_ms, events_kept, node_prefix, seat_flags = ARGV[13], ARGV[14], ARGV[15], ARGV[16]
local head, seat0, seat1 = ARGV[17], ARGV[18], ARGV[19]
local games_mode, games_limit, games_ttl_ms = ARGV[20], ARGV[21], ARGV[22]
local job, job_id, job_lane, job_cost_ms = ARGV[23], ARGV[24], ARGV[25], ARGV[26]
local max_waiting, max_lead_ms, worker_ttl_ms = ARGV[27], ARGV[28], ARGV[29]
local room_prefix, dispatch_scan = ARGV[30], ARGV[31]
local games_grace_ms, games_kept, games_listed = ARGV[32], ARGV[33], ARGV[34]
local outbox_kept = ARGV[36]
local others_counted, others_unfinished = tonumber(ARGV[37] or '0'), tonumber(ARGV[38] or '0')

local room_keys = {room, events, presence, chat_players, chat_spectators}

local current = redis.call('HGET', room, 'version')
if expected_version < 0 then
  if current then return {0, tonumber(current)} end
elseif (not current) or tonumber(current) ~= expected_version then
  return {0, tonumber(current or -1)}
end
local now = fair_now()
local stale_games = {}
if games_mode == 'create' then
  local counted, unfinished, playing, idle
  local presence_of
  if cluster then
    presence_of = ai_games_presence_handed(12)
  else
    presence_of = ai_games_presence_built(room_prefix)
  end
  counted, unfinished, playing, idle, stale_games = ai_games_count(
    ai_games, live, presence_of, nodes_alive(node_prefix, presence_beats), now,
    games_grace_ms, games_listed)
  if counted + others_counted >= tonumber(games_limit) then
    return {-1, counted, unfinished, unpack(playing)}
  elseif unfinished + others_unfinished >= tonumber(games_kept) then
    -- Past the games kept: the ones played first, then the ones left, as many as listed.
    for _, id in ipairs(idle) do
      if #playing >= tonumber(games_listed) then break end
      playing[#playing + 1] = id
    end
    return {-1, counted, unfinished, unpack(playing)}
  end
end
if job ~= '' then
  if cluster then
    local queued = redis.call('XLEN', ai_outbox)
    if queued >= tonumber(outbox_kept) then return {-2, queued} end
  elseif not fair_has_room(ai_waiting, job_id, max_waiting) then
    return {-2, redis.call('HLEN', ai_waiting)}
  end
end
redis.call('HSET', room, 'version', version, 'data', record)
redis.call('XADD', events, 'MAXLEN', '~', events_kept, version .. '-1',
           'version', version, 'event', event, 'at', updated_ms)
if is_live == '1' then
  redis.call('ZADD', live, updated_ms, room_id)
else
  redis.call('ZREM', live, room_id)
end
if status == 'waiting' then
  for _, key in ipairs(room_keys) do redis.call('PEXPIRE', key, waiting_ttl_ms) end
elseif status == 'playing' then
  for _, key in ipairs(room_keys) do redis.call('PERSIST', key) end
elseif to_archive == '1' then
  -- The game ended: the archiver takes it from here. Only the first commit of a finished
  -- room queues it (later ones, rematch offers, find it queued).
  if redis.call('HEXISTS', room, 'archive') == 0 then
    redis.call('HSET', room, 'archive', 'queued')
    redis.call('XADD', archive, '*', 'room', room_id, 'ttl_ms', finished_ttl_ms)
  end
else
  -- An aborted game is not archived: its keys get the finished room's lifetime now (no
  -- "archive" field, so nothing queues it later).
  for _, key in ipairs(room_keys) do redis.call('PEXPIRE', key, finished_ttl_ms) end
end
-- After the lifetimes above: a presence hash this creates takes the room's.
local snapshot, present = presence_splice(presence, room, node_prefix, seat_flags, head,
                                          seat0, seat1)
nodes_publish(cluster, channel, snapshot)
if deadline_ms == '' then
  redis.call('ZREM', deadlines, room_id)
else
  redis.call('ZADD', deadlines, deadline_ms, room_id)
end
if games_mode == 'end' then
  redis.call('ZREM', ai_games, room_id)
elseif games_mode ~= '' then
  redis.call('ZADD', ai_games, now, room_id)
  redis.call('PEXPIRE', ai_games, games_ttl_ms)
end
-- Rooms that left the lobby without an ending commit (forgotten) leave the set.
if #stale_games > 0 then redis.call('ZREM', ai_games, unpack(stale_games)) end
-- Only a commit that queues a job has anything new to admit (workers admit the rest as
-- they free up), so a move between people pays nothing for the AI queue.
if cluster then
  local entry = ''
  if job ~= '' then
    entry = redis.call('XADD', ai_outbox, 'MAXLEN', '~', outbox_kept, '*', 'job', job,
                       'id', job_id, 'lane', job_lane, 'cost', job_cost_ms)
  end
  return {1, tonumber(version), present[1], present[2], present[3], present[4], present[5],
          entry}
end
if job ~= '' then
  fair_enqueue(ai_ready, ai_waiting, ai_owners, ai_clock, job_lane, job_id, job, job_cost_ms,
               max_lead_ms)
  fair_dispatch(ai_ready, ai_waiting, ai_clock, jobs, ai_workers, now, worker_ttl_ms,
                room_prefix, dispatch_scan)
end
return {1, tonumber(version), present[1], present[2], present[3], present[4], present[5]}
