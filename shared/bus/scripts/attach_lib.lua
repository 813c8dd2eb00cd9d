-- Counting a connection in or out (a library, after presence_lib.lua).
--
-- presence_attach counts a connection of a seat's player (field "SEAT:NODE") or a
-- spectator ("s:NODE") on a node in or out. mode "add": n is a delta; "set": n is the
-- count. Drops fields that reach zero; for a seat, records since when its player has had
-- no connection anywhere (or clears that once it has one). Returns the count.

local function presence_attach(hash, room, field, n, mode, node_prefix)
  n = tonumber(n)
  if mode == 'add' then n = redis.call('HINCRBY', hash, field, n) end
  if n <= 0 then
    redis.call('HDEL', hash, field)
  elseif mode == 'set' then
    redis.call('HSET', hash, field, n)
  end
  local seat = string.match(field, '^(%d+):')
  if seat then
    local counts = presence_counts(hash, node_prefix)
    if (counts[tonumber(seat) + 1] or 0) > 0 then
      redis.call('HDEL', hash, 'gone:' .. seat)
    elseif redis.call('HEXISTS', hash, 'gone:' .. seat) == 0 then
      redis.call('HSET', hash, 'gone:' .. seat, string.format('%d', presence_now()))
    end
  end
  presence_ttl(hash, room)
  return n
end
