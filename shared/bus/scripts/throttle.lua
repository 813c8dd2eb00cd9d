-- One throttle counter: failures (or sign-ups) in a fixed window that starts at the first.
-- (shared/bus/throttle.py, Throttle)
--
-- KEYS[1]  the counter (string: an integer; expires a window after its first count)
-- ARGV[1]  the window (ms)
-- ARGV[2]  the limit: counts allowed in the window
-- ARGV[3]  "check": only look; "take": count one unless at the limit; "add": count one
--
-- Returns 0 when under the limit (for "take": counted), else the ms until the window ends
-- (nothing counted). "add" always counts and returns 0.
local window = tonumber(ARGV[1])
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
local mode = ARGV[3]
if mode ~= 'add' and count >= tonumber(ARGV[2]) then
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then
    redis.call('PEXPIRE', KEYS[1], window)
    left = window
  end
  return left
end
if mode == 'check' then return 0 end
local now = redis.call('INCR', KEYS[1])
if now == 1 or redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], window)
end
return 0
