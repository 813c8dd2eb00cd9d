-- A server node's heartbeat: beats for the node, and announces (once, atomically) every
-- node whose last beat is past its TTL: their players now count as gone.
--
--   KEYS[1]  node        the node's heartbeat key (with a TTL)
--   KEYS[2]  node_beats  sorted set: node -> last heartbeat (ms)
--   ARGV[1]  node        the node's name
--   ARGV[2]  ttl_s       the heartbeat's lifetime
--   ARGV[3]  channel     where a dead node is announced
--   ARGV[4]  sharded     '1' on a Redis Cluster: announce with SPUBLISH (the control slot's
--                        channel), and return {dead, now}
--
-- Returns how many dead nodes it announced (a Redis Cluster: {that, the Redis time in ms},
-- the score the node then gives itself in every group's copy of the beats).

local node_key, beats = KEYS[1], KEYS[2]
local node, ttl_s, channel, sharded = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', node_key, t[1], 'EX', ttl_s)
redis.call('ZADD', beats, now, node)
local dead = redis.call('ZRANGEBYSCORE', beats, '-inf', now - tonumber(ttl_s) * 1000 - 1000)
for _, gone in ipairs(dead) do
  redis.call('ZREM', beats, gone)
  if sharded == '1' then
    redis.call('SPUBLISH', channel, gone)
  else
    redis.call('PUBLISH', channel, gone)
  end
end
if sharded == '1' then return {#dead, now} end
return #dead
