"""The hot-reset token bucket of the reference (pkg/server/token_bucket.go), as values and pure functions.

One bucket per faulty chip: created full on first use, with its last refill at that moment. A
reset of the chip's group costs one token of the faulty chip alone. Tokens do not trickle back:
once a whole refill interval has passed since the last refill, the bucket is full again and that
moment is its new last refill. Every function takes "now" in ms and returns new values, so
`stored_tokens` can apply the rule inside one store transaction and tests can step time freely.

Time only moves forward: a "now" before the last refill (a wall clock stepped back) refills
nothing, as the reference's negative duration refills nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

TOKEN_REFILL_INTERVAL_MS = 6 * 3600 * 1000  # tokenRefillInterval: 6 h of policy time
TOKEN_MAX_COUNT = 3  # tokenMaxCount


@dataclass(frozen=True, slots=True)
class TokenBucket:
    tokens: int
    last_refill_ms: int

    @classmethod
    def new(cls, now_ms: int) -> TokenBucket:
        """NewTokenBucket: full, its refill interval starting now."""
        return cls(TOKEN_MAX_COUNT, int(now_ms))

    def refill(self, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS) -> TokenBucket:
        """The bucket as it is at `now_ms`: full again (and refilled now) once an interval has passed."""
        if now_ms - self.last_refill_ms >= interval_ms:
            return TokenBucket(TOKEN_MAX_COUNT, int(now_ms))
        return self

    def tokens_at(self, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS) -> int:
        """GetTokens: the tokens left at `now_ms`."""
        return self.refill(now_ms, interval_ms=interval_ms).tokens

    def has_token(self, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS) -> bool:
        """HasToken: whether a reset could be paid for at `now_ms`."""
        return self.tokens_at(now_ms, interval_ms=interval_ms) > 0

    def consume(self, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS) -> tuple[TokenBucket, bool]:
        """Consume: (the bucket afterwards, whether a token was taken). An empty bucket stays as refilled."""
        current = self.refill(now_ms, interval_ms=interval_ms)
        if current.tokens <= 0:
            return current, False
        return replace(current, tokens=current.tokens - 1), True


# TokenBucketMgr over one chip's bucket, where None is a chip that has none yet. A read creates no
# bucket here (the reference's getOrCreateBucket does): only a consume starts a chip's interval.


def has_token(bucket: TokenBucket | None, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS) -> bool:
    """TokenBucketMgr.HasToken."""
    return bucket is None or bucket.has_token(now_ms, interval_ms=interval_ms)


def tokens_left(bucket: TokenBucket | None, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS) -> int:
    """TokenBucketMgr.GetTokens."""
    return TOKEN_MAX_COUNT if bucket is None else bucket.tokens_at(now_ms, interval_ms=interval_ms)


def consume_token(
    bucket: TokenBucket | None, now_ms: int, *, interval_ms: int = TOKEN_REFILL_INTERVAL_MS
) -> tuple[TokenBucket, bool]:
    """TokenBucketMgr.ConsumeToken: a chip's first consume creates its bucket full, refilled now."""
    return (bucket or TokenBucket.new(now_ms)).consume(now_ms, interval_ms=interval_ms)
