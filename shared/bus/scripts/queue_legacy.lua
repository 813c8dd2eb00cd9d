-- Queue a finished room for archiving if it never was (it ended before the archive
-- existed: no "archive" field, no TTL).
--
--   KEYS[1]  room      the room's record
--   KEYS[2]  archive   the archive stream
--   ARGV[1]  room_id
--   ARGV[2]  ttl_ms    how long the room stays once archived (written into the entry)
--
-- Returns 1 if it queued the room, else 0.

local room, archive = KEYS[1], KEYS[2]
local room_id, ttl_ms = ARGV[1], ARGV[2]

if redis.call('PTTL', room) ~= -1 or redis.call('HEXISTS', room, 'archive') == 1 then
  return 0
end
local ok, data = pcall(cjson.decode, redis.call('HGET', room, 'data') or '')
if not ok or type(data) ~= 'table' or data['status'] ~= 'over' then return 0 end
redis.call('HSET', room, 'archive', 'queued')
redis.call('XADD', archive, '*', 'room', room_id, 'ttl_ms', ttl_ms)
return 1
