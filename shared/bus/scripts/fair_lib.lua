-- The fair queue in front of the jobs stream (a library: joined before the scripts that
-- use it; see kibitz.shared.bus.fair_queue for the policy and its Python model).
--
-- On a single Redis, fair_dispatch reads the record of each queued job's room
-- (room_prefix .. '{' .. room .. '}') to drop a job whose room moved on: rooms not known
-- before the script runs, keys it is not handed, which a single Redis allows. On a Redis
-- Cluster the rooms are in other slots: the caller passes room_prefix "" and dispatch
-- sends every job it takes (the worker drops a stale one: it reads the room's version
-- before it searches).

local FAIR_COST_SCALE = 10000  -- a ready job's score is its start tag + cost / this (ties)

local function fair_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether one more job fits in the fair queue.
local function fair_has_room(waiting, id, max_waiting)
  return redis.call('HEXISTS', waiting, id) == 1
      or redis.call('HLEN', waiting) < tonumber(max_waiting)
end

-- Queue a job behind its owner's earlier ones (start-time fair queueing).
local function fair_enqueue(ready, waiting, owners, clock, owner, id, job, cost, max_lead)
  local v = tonumber(redis.call('GET', clock) or '0')
  if redis.call('ZCARD', ready) == 0 then
    redis.call('DEL', owners)
  else
    redis.call('ZREMRANGEBYSCORE', owners, '-inf', v)
  end
  local last = tonumber(redis.call('ZSCORE', owners, owner) or v)
  local start = math.min(math.max(v, last), v + tonumber(max_lead))
  redis.call('ZADD', ready, start + tonumber(cost) / FAIR_COST_SCALE, id)
  redis.call('HSET', waiting, id, job)
  redis.call('ZADD', owners, start + tonumber(cost), owner)
end

-- Move jobs from the fair queue into the stream while it holds fewer than the live
-- workers; drop the ones whose room has moved on. Returns {sent, dropped}.
local function fair_dispatch(ready, waiting, clock, jobs, live, now, worker_ttl, room_prefix, scan)
  redis.call('ZREMRANGEBYSCORE', live, '-inf', now - tonumber(worker_ttl))
  local window = math.max(1, redis.call('ZCARD', live))
  local free = window - redis.call('XLEN', jobs)
  local sent, dropped, looked = 0, 0, 0
  while free > 0 and looked < tonumber(scan) do
    local head = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
    if #head == 0 then break end
    looked = looked + 1
    local id, start = head[1], math.floor(tonumber(head[2]))
    local job = redis.call('HGET', waiting, id)
    redis.call('ZREM', ready, id)
    redis.call('HDEL', waiting, id)
    local current = false
    if job then
      local ok, data = pcall(cjson.decode, job)
      if room_prefix == '' then
        current = ok and type(data) == 'table'  -- a Redis Cluster: no room read (see above)
      elseif ok and type(data) == 'table' and type(data['room']) == 'string' then
        -- A single Redis: the job's room, not in KEYS (see above).
        current = redis.call('HGET', room_prefix .. '{' .. data['room'] .. '}', 'version')
        if current and tonumber(current) ~= tonumber(data['version']) then current = false end
      end
    end
    if current then
      redis.call('XADD', jobs, '*', 'job', job)
      if start > tonumber(redis.call('GET', clock) or '0') then
        redis.call('SET', clock, string.format('%d', start))
      end
      sent = sent + 1
      free = free - 1
    else
      dropped = dropped + 1
    end
  end
  return {sent, dropped}
end

-- Queue jobs relayed from the slot groups' outboxes (a Redis Cluster), each outbox entry
-- once: an entry relayed in the last keep_ms (the set ``relayed``: "group/entry id" ->
-- when, ms; at most ``most`` of them) is not queued again, nor is a job whose id is
-- waiting already with the same JSON. (A job id comes back with another entry only when a
-- failover lost the commit that made it and the room was played again from the version
-- before: that job is queued, replacing a waiting one of the same id.) ``entries``: a flat
-- list of the entry ("group/entry id"), job id, job JSON, lane, cost. Returns {queued,
-- duplicates}.
local function fair_relay(ready, waiting, owners, clock, relayed, now, max_lead, keep_ms, most,
                          entries)
  local queued, duplicates = 0, 0
  for i = 1, #entries, 5 do
    local entry, id, job = entries[i], entries[i + 1], entries[i + 2]
    local lane, cost = entries[i + 3], entries[i + 4]
    if redis.call('ZSCORE', relayed, entry) or redis.call('HGET', waiting, id) == job then
      duplicates = duplicates + 1
    else
      fair_enqueue(ready, waiting, owners, clock, lane, id, job, cost, max_lead)
      queued = queued + 1
    end
    redis.call('ZADD', relayed, now, entry)
  end
  redis.call('ZREMRANGEBYSCORE', relayed, '-inf', now - tonumber(keep_ms))
  redis.call('ZREMRANGEBYRANK', relayed, 0, -tonumber(most) - 1)
  return {queued, duplicates}
end
