"""The errors of the Redis boundary, under the bus's own names.

Code outside ``kibitz.shared.bus`` catches these and never imports redis-py: a lost
connection is ``BusConnectionError``, a command Redis refused is ``BusResponseError``, and
``BusError`` is any of them.
"""

from __future__ import annotations

from redis.exceptions import ConnectionError as BusConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import RedisError as BusError
from redis.exceptions import ResponseError as BusResponseError
from redis.exceptions import TimeoutError as BusTimeoutError

__all__ = ["BusConnectionError", "BusError", "BusResponseError", "BusTimeoutError", "NoScriptError"]
