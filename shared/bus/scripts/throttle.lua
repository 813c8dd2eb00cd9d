-- One throttle counter: attempts (or sign-ups) in a fixed window that starts at the first.
-- (shared/bus/throttle.py, Throttle)
--
-- KEYS[1]  the counter (string: an integer; expires a window after its first count)
-- ARGV[1]  the window (ms)
-- ARGV[2]  the limit: counts allowed in the window
-- ARGV[3]  "take": count one unless at the limit; "give": uncount one taken (never below
--          0; the window is left as it is)
--
-- Returns 0 when counted (or given back), else the ms until the window ends (nothing
-- counted). Counting before the work it pays for makes the limit hold for attempts made
-- at the same moment: the one past the limit is refused however many race.
local window = tonumber(ARGV[1])
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if ARGV[3] == 'give' then
  if count > 0 then redis.call('DECR', KEYS[1]) end
  return 0
end
if count >= tonumber(ARGV[2]) then
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then
    redis.call('PEXPIRE', KEYS[1], window)
    left = window
  end
  return left
end
local now = redis.call('INCR', KEYS[1])
if now == 1 or redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], window)
end
return 0
