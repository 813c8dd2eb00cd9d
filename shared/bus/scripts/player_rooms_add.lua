-- Note a room a player was just seated in (shared/bus/playing.py, PlayerRooms.seated).
--
-- KEYS[1]  the player's rooms (sorted set: room id -> when seated, ms)
-- ARGV[1]  the room id
-- ARGV[2]  when (ms)
-- ARGV[3]  the most rooms kept (the newest)
-- ARGV[4]  the key's lifetime after this seating (ms); older entries are dropped too
--
-- Returns how many rooms the key holds now.
local key, room, at = KEYS[1], ARGV[1], tonumber(ARGV[2])
local kept, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZADD', key, at, room)
redis.call('ZREMRANGEBYSCORE', key, '-inf', at - ttl)
redis.call('ZREMRANGEBYRANK', key, 0, -(kept + 1))
redis.call('PEXPIRE', key, ttl)
return redis.call('ZCARD', key)
