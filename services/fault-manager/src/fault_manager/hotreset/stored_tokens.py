"""Hot reset's token buckets as the store keeps them, one per faulty chip: the rule of `tokens`
applied to the stored buckets (the reference's TokenBucketMgr). The functions are synchronous (call
them through `store.in_store_thread`); `ResetTokens` is hot reset's asynchronous door to them, on policy time."""

from __future__ import annotations

import logging

from ascend_common.clock import Clock, policy_seconds
from ascend_common.schemas.exporter import Chip

from fault_manager.hotreset.token_bucket import (
    TOKEN_MAX_COUNT,
    TOKEN_REFILL_INTERVAL_MS,
    TokenBucket,
    consume_token,
    tokens_left,
)
from fault_manager.store import Store, in_store_thread
from fault_manager.store.reset_buckets import ResetBuckets, StoredBucket

log = logging.getLogger(__name__)


def consume(
    buckets: ResetBuckets, chip: str, logic_id: int, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS
) -> bool:
    """Take one token of the faulty chip's bucket (created full on its first reset); False: none left."""

    def change(stored: StoredBucket | None) -> tuple[StoredBucket, bool]:
        bucket, taken = consume_token(_bucket(stored), int(now_ms), interval_ms=interval_ms)
        return StoredBucket(bucket.tokens, bucket.last_refill_ms), taken

    bucket, taken = buckets.update(chip, logic_id, change)
    if taken:
        log.info("reset token consumed", extra={"chip": chip, "logic_id": logic_id, "tokens": bucket.tokens})
    return taken


def tokens(buckets: ResetBuckets, chip: str, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS) -> int:
    """The tokens a chip has at `now_ms` (TOKEN_MAX_COUNT before its first reset). Reading writes nothing."""
    return tokens_left(_bucket(buckets.get(chip)), int(now_ms), interval_ms=interval_ms)


def tokens_by_chip(
    buckets: ResetBuckets, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS
) -> dict[str, int]:
    """The tokens at `now_ms` of every chip that has a bucket, by chip; any other chip has TOKEN_MAX_COUNT."""
    return {
        chip: TokenBucket(*stored).tokens_at(int(now_ms), interval_ms=interval_ms)
        for chip, stored in buckets.all().items()
    }


def _bucket(stored: StoredBucket | None) -> TokenBucket | None:
    return None if stored is None else TokenBucket(*stored)


class ResetTokens:
    """The reset tokens of the node's chips, as hot reset spends them."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def _interval_ms(self) -> int:
        """The token refill interval in real ms (it runs on policy time)."""
        return round(policy_seconds(self.clock, TOKEN_REFILL_INTERVAL_MS / 1000) * 1000)

    async def has(self, chip: Chip, now_ms: int) -> bool:
        left = await in_store_thread(tokens, self.store.buckets, chip.name, now_ms, interval_ms=self._interval_ms())
        return left > 0

    async def consume(self, chip: Chip, now_ms: int) -> bool:
        """One token of the faulty chip's bucket (the reference's TokenBucketMgr.ConsumeToken: the
        rest of its group pays nothing)."""
        return await in_store_thread(
            consume, self.store.buckets, chip.name, chip.logic_id, now_ms, interval_ms=self._interval_ms()
        )

    async def left(self, names: frozenset[str], now_ms: int) -> dict[str, int]:
        """Reset tokens left per chip of `names` and of every chip with a bucket (a chip that never
        used its bucket has them all)."""
        used = await in_store_thread(tokens_by_chip, self.store.buckets, now_ms, interval_ms=self._interval_ms())
        return {chip: used.get(chip, TOKEN_MAX_COUNT) for chip in sorted(names | set(used))}
