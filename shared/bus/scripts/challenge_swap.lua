-- Change a challenge's record only if it is still what the caller read
-- (shared/bus/challenges.py, Challenges.decide): of two changes at once, one wins.
--
-- KEYS[1]  the challenge (string: its JSON record)
-- ARGV[1]  the record as the caller read it
-- ARGV[2]  the new record
-- ARGV[3]  the new record's lifetime (ms)
--
-- Returns 1 when written, 0 when the record had changed or gone (nothing written).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
