"""Hot reset's token buckets as the store keeps them, one per faulty chip: the rule of `reset_tokens`
applied to the stored buckets (the reference's TokenBucketMgr). Synchronous: call through to_thread."""

from __future__ import annotations

import logging

from fault_manager.hotreset.tokens import TOKEN_REFILL_INTERVAL_MS, consume_token, tokens_left
from fault_manager.store.reset_buckets import ResetBuckets

log = logging.getLogger(__name__)


def consume(
    buckets: ResetBuckets, chip: str, logic_id: int, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS
) -> bool:
    """Take one token of the faulty chip's bucket (created full on its first reset); False: none left."""
    bucket, taken = buckets.update(
        chip, logic_id, lambda stored: consume_token(stored, int(now_ms), interval_ms=interval_ms)
    )
    if taken:
        log.info("reset token consumed", extra={"chip": chip, "logic_id": logic_id, "tokens": bucket.tokens})
    return taken


def tokens(buckets: ResetBuckets, chip: str, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS) -> int:
    """The tokens a chip has at `now_ms` (TOKEN_MAX_COUNT before its first reset). Reading writes nothing."""
    return tokens_left(buckets.get(chip), int(now_ms), interval_ms=interval_ms)


def tokens_by_chip(
    buckets: ResetBuckets, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS
) -> dict[str, int]:
    """The tokens at `now_ms` of every chip that has a bucket, by chip; any other chip has TOKEN_MAX_COUNT."""
    return {chip: b.tokens_at(int(now_ms), interval_ms=interval_ms) for chip, b in buckets.all().items()}
