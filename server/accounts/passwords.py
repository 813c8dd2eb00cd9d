"""Password hashes: argon2id through argon2-cffi, computed off the event loop.

The cost is OWASP's argon2id recommendation (19 MiB, 2 passes, 1 lane); at most
``CONCURRENT_HASHES`` run at once per process, so a flood of log-ins queues instead of
taking the node's memory and every core. A log-in for a name that has no account (or no
password) still verifies against a fixed dummy hash, so the answer takes as long as a
wrong password: the time does not tell which names exist.
"""

from __future__ import annotations

import asyncio

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

HASHER = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)
CONCURRENT_HASHES = 4
_DUMMY = HASHER.hash("kibitz: no such account, and no such password either")
_gate: asyncio.Semaphore | None = None


def _semaphore() -> asyncio.Semaphore:
    global _gate
    if _gate is None:
        _gate = asyncio.Semaphore(CONCURRENT_HASHES)
    return _gate


def _verify(stored: str, password: str) -> bool:
    try:
        return HASHER.verify(stored, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


async def hash_password(password: str) -> str:
    """The argon2id hash of ``password`` (in a thread)."""
    async with _semaphore():
        return await asyncio.to_thread(HASHER.hash, password)


async def verify_password(stored: str | None, password: str) -> bool:
    """Whether ``password`` matches ``stored``; with no stored hash, the same work against
    a dummy hash, and False."""
    async with _semaphore():
        matched = await asyncio.to_thread(_verify, stored or _DUMMY, password)
    return matched and stored is not None


def needs_rehash(stored: str) -> bool:
    """Whether ``stored`` was made with other parameters than today's."""
    try:
        return HASHER.check_needs_rehash(stored)
    except InvalidHashError:
        return False
