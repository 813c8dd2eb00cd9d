"""Each connection's network lag, measured by the server from its own ping frames.

Decides the lag a seated connection is credited for (server/domain/clocks.py) and which
pongs count towards it; the hub's ping loop (hub.py) sends the pings.

A connection that holds a seat gets a WebSocket ping frame every ``PING_INTERVAL_S``
(the first within ``PING_CHECK_S`` of taking the seat). The payload is a sequence number the server
remembers with the time it sent it; the client's pong (browsers and WebSocket libraries
answer pings on their own) gives one round trip. A pong that answers no outstanding
ping (made up, repeated, or older than ``MAX_RTT_MS``) counts for nothing.

The estimate is the median of the last ``SAMPLES`` round trips: one slow pong does not
move it, a line that got slow does within a few pings. It is what the server credits a
move for (see server/domain/clocks.py: at most ``LAG_CREDIT_MAX_MS`` a move and what is left of
the seat's bank), so a client that delays its pongs on purpose gains at most that.
"""

from __future__ import annotations

import statistics
import struct
import time
from collections import OrderedDict, deque

PING_INTERVAL_S = 2.0
PING_CHECK_S = 0.2  # how soon a connection that takes a seat gets its first ping
SAMPLES = 5
MAX_RTT_MS = 10_000  # a pong later than this is not a round trip we count
MAX_OUTSTANDING = 8  # pings remembered while unanswered


class LagTracker:
    """Round trips of one connection's pings, and the lag estimate from them."""

    def __init__(self, samples: int = SAMPLES) -> None:
        self._sent: OrderedDict[int, float] = OrderedDict()
        self._next = 1
        self.rtts: deque[float] = deque(maxlen=samples)
        self.last_sent = float("-inf")  # when the last ping went (monotonic s)

    def ping_payload(self, now: float | None = None) -> bytes:
        """The payload of the next ping frame (remembered as sent ``now``, monotonic s)."""
        seq = self._next
        self._next += 1
        self._sent[seq] = self.last_sent = time.monotonic() if now is None else now
        while len(self._sent) > MAX_OUTSTANDING:
            self._sent.popitem(last=False)
        return struct.pack("!Q", seq)

    def on_pong(self, payload: bytes, now: float | None = None) -> float | None:
        """Record the pong with ``payload``; the round trip in ms, or None if it answers
        no ping we are waiting for."""
        if len(payload) != 8:
            return None
        (seq,) = struct.unpack("!Q", payload)
        sent = self._sent.pop(seq, None)
        if sent is None:
            return None
        rtt = ((time.monotonic() if now is None else now) - sent) * 1000.0
        if not 0 <= rtt <= MAX_RTT_MS:
            return None
        self.rtts.append(rtt)
        return rtt

    @property
    def estimate_ms(self) -> int:
        """The connection's lag (median round trip, ms); 0 before any pong."""
        if not self.rtts:
            return 0
        return int(statistics.median(self.rtts))
