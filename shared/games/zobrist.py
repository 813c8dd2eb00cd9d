"""Deterministic random keys for Zobrist hashing (same keys in every process)."""

from __future__ import annotations

import random


def zobrist_keys(game: str, count: int) -> list[int]:
    """``count`` 64-bit keys, seeded by the game id so every process agrees."""
    rng = random.Random(f"kibitz-zobrist-{game}")
    return [rng.getrandbits(64) for _ in range(count)]
