-- Give back one room counted by address_count_create that was not made after all.
-- (shared/bus/limits.py, AddressCounters.refund_create)
--
-- KEYS[1]  the address's room log
-- ARGV[1]  the count's member
--
-- Returns 1 if it was given back, 0 if it was gone already (a second refund of one room
-- gives back nothing).
return redis.call('ZREM', KEYS[1], ARGV[1])
