"""Which version answers a call during a canary rollout: ``canary_percent`` of calls go to
the canary, chosen by a stable hash of the caller's key (the same user always meets the
same version, in every process) or, without a key, at random per call. The hash is salted
with the rollout's id, so each rollout's canary users are another sample."""

from __future__ import annotations

import random
from hashlib import blake2b

BUCKETS = 1 << 64


def key_share(key: object, rollout_id: int) -> float:
    """Where ``key`` falls in [0, 100) for rollout ``rollout_id``: stable across processes
    and runs (BLAKE2b, not Python's salted ``hash``)."""
    digest = blake2b(f"{rollout_id}:{key}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") * 100.0 / BUCKETS


def goes_to_canary(key: object | None, rollout_id: int, percent: float) -> bool:
    """True when this call is the canary's: by ``key`` when given, else at random."""
    share = random.random() * 100.0 if key is None else key_share(key, rollout_id)
    return share < percent
