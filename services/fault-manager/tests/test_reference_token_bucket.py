"""The reference's hot-reset token bucket tests, ported: each test is named after the Go test whose convey
cases it carries (component/ascend-device-plugin/pkg/server/token_bucket_test.go), with its steps and
expected values.

The Go bucket reads `time.Now()` and a test moves `lastRefill` back instead of the clock; ours are pure
values (`fault_manager.hotreset.token_bucket`) that take "now", so a case builds the bucket the Go test ends up
with. The TokenBucketMgr tests run twice: over the pure functions (a dict of buckets, as the Go map)
and over the Store, which keeps one bucket per chip in SQLite (the chip named after the logic id here).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest
from fault_manager.hotreset import stored_tokens
from fault_manager.hotreset.token_bucket import (
    TOKEN_MAX_COUNT,
    TOKEN_REFILL_INTERVAL_MS,
    TokenBucket,
    consume_token,
    has_token,
    tokens_left,
)
from fault_manager.store import Store

NOW = 1_700_000_000_000  # time.Now() of the Go test
SECOND = 1000
HOUR = 3_600_000


def consumed(times: int, now_ms: int = NOW) -> TokenBucket:
    """NewTokenBucket() then `times` Consume() calls, all at `now_ms`."""
    bucket = TokenBucket.new(now_ms)
    for _ in range(times):
        bucket, _taken = bucket.consume(now_ms)
    return bucket


def test_constants_are_the_references() -> None:
    assert (TOKEN_MAX_COUNT, TOKEN_REFILL_INTERVAL_MS) == (3, 6 * HOUR)


@pytest.mark.parametrize(
    ("consumes", "has", "tokens"),
    [
        pytest.param(0, True, TOKEN_MAX_COUNT, id="new bucket should have tokens"),
        pytest.param(TOKEN_MAX_COUNT, False, None, id="bucket with zero tokens should return false"),
    ],
)
def test_token_bucket_has_token(consumes: int, has: bool, tokens: int | None) -> None:
    """TestTokenBucketHasToken."""
    bucket = consumed(consumes)
    assert bucket.has_token(NOW) is has
    if tokens is not None:
        assert bucket.tokens_at(NOW) == tokens


@pytest.mark.parametrize(
    ("consumes", "taken", "tokens"),
    [
        pytest.param(0, True, TOKEN_MAX_COUNT - 1, id="consume should decrease tokens"),
        pytest.param(TOKEN_MAX_COUNT, False, None, id="consume on empty bucket should return false"),
    ],
)
def test_token_bucket_consume(consumes: int, taken: bool, tokens: int | None) -> None:
    """TestTokenBucketConsume."""
    after, took = consumed(consumes).consume(NOW)
    assert took is taken
    if tokens is not None:
        assert after.tokens_at(NOW) == tokens


@pytest.mark.parametrize(
    ("consumes", "last_refill_ago_ms", "has", "tokens"),
    [
        pytest.param(
            TOKEN_MAX_COUNT,
            TOKEN_REFILL_INTERVAL_MS + SECOND,
            True,
            TOKEN_MAX_COUNT,
            id="refill after interval should restore tokens",
        ),
        pytest.param(1, HOUR, None, TOKEN_MAX_COUNT - 1, id="refill before interval should not restore tokens"),
    ],
)
def test_token_bucket_refill(consumes: int, last_refill_ago_ms: int, has: bool | None, tokens: int) -> None:
    """TestTokenBucketRefill: `tb.lastRefill = time.Now().Add(-ago)`."""
    bucket = TokenBucket(consumed(consumes).tokens, NOW - last_refill_ago_ms)
    if has is not None:
        assert bucket.has_token(NOW) is has
    assert bucket.tokens_at(NOW) == tokens
    # The refill happens at that read, so the next interval starts there (the Go bucket keeps it).
    refilled = bucket.refill(NOW)
    assert refilled.last_refill_ms == (NOW if last_refill_ago_ms >= TOKEN_REFILL_INTERVAL_MS else bucket.last_refill_ms)


@pytest.mark.parametrize(
    ("consumes", "last_refill_ago_ms", "tokens"),
    [
        pytest.param(0, 0, TOKEN_MAX_COUNT, id="new bucket should return max tokens"),
        pytest.param(2, 0, TOKEN_MAX_COUNT - 2, id="after partial consume should return remaining tokens"),
        pytest.param(TOKEN_MAX_COUNT, 0, 0, id="after full consume should return zero"),
        pytest.param(
            TOKEN_MAX_COUNT, TOKEN_REFILL_INTERVAL_MS + SECOND, TOKEN_MAX_COUNT, id="refill should reset tokens to max"
        ),
    ],
)
def test_token_bucket_get_tokens(consumes: int, last_refill_ago_ms: int, tokens: int) -> None:
    """TestTokenBucketGetTokens."""
    bucket = TokenBucket(consumed(consumes).tokens, NOW - last_refill_ago_ms)
    assert bucket.tokens_at(NOW) == tokens


# --- TokenBucketMgr: buckets by logic id ----------------------------------------------------------


class Mgr(Protocol):
    def has_token(self, logic_id: int) -> bool: ...
    def consume_token(self, logic_id: int) -> bool: ...
    def get_tokens(self, logic_id: int) -> int: ...


class PureMgr:
    """The Go map of buckets, over the pure functions."""

    def __init__(self) -> None:
        self.buckets: dict[int, TokenBucket] = {}

    def has_token(self, logic_id: int) -> bool:
        return has_token(self.buckets.get(logic_id), NOW)

    def consume_token(self, logic_id: int) -> bool:
        self.buckets[logic_id], taken = consume_token(self.buckets.get(logic_id), NOW)
        return taken

    def get_tokens(self, logic_id: int) -> int:
        return tokens_left(self.buckets.get(logic_id), NOW)


class StoreMgr:
    """The Store's buckets, one per chip; a chip is named after its logic id here."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def has_token(self, logic_id: int) -> bool:
        return stored_tokens.tokens(self.store.buckets, f"Ascend910-{logic_id}", NOW) > 0

    def consume_token(self, logic_id: int) -> bool:
        return stored_tokens.consume(self.store.buckets, f"Ascend910-{logic_id}", logic_id, NOW)

    def get_tokens(self, logic_id: int) -> int:
        return stored_tokens.tokens(self.store.buckets, f"Ascend910-{logic_id}", NOW)


@pytest.fixture(params=["pure", "store"])
def mgr(request: pytest.FixtureRequest) -> Iterator[Mgr]:
    if request.param == "pure":
        yield PureMgr()
        return
    with tempfile.TemporaryDirectory(prefix="fm-buckets-") as tmp, Store(Path(tmp) / "faults.db") as store:
        yield StoreMgr(store)


@pytest.mark.parametrize(
    ("consumes_of_0", "has"),
    [
        pytest.param(0, {0: True, 1: True}, id="new mgr should have tokens for any logicID"),
        pytest.param(TOKEN_MAX_COUNT, {0: False, 1: True}, id="different logicIDs should have independent buckets"),
    ],
)
def test_token_bucket_mgr_has_token(mgr: Mgr, consumes_of_0: int, has: dict[int, bool]) -> None:
    """TestTokenBucketMgrHasToken."""
    for _ in range(consumes_of_0):
        mgr.consume_token(0)
    assert {logic: mgr.has_token(logic) for logic in has} == has


@pytest.mark.parametrize(
    ("consumes", "taken", "tokens"),
    [
        pytest.param(0, True, TOKEN_MAX_COUNT - 1, id="consume should decrease tokens for specific logicID"),
        pytest.param(TOKEN_MAX_COUNT, False, None, id="consume on exhausted bucket should return false"),
    ],
)
def test_token_bucket_mgr_consume_token(mgr: Mgr, consumes: int, taken: bool, tokens: int | None) -> None:
    """TestTokenBucketMgrConsumeToken."""
    for _ in range(consumes):
        mgr.consume_token(0)
    assert mgr.consume_token(0) is taken
    if tokens is not None:
        assert mgr.get_tokens(0) == tokens


@pytest.mark.parametrize(
    ("consumes_of_0", "tokens"),
    [
        pytest.param(0, {0: TOKEN_MAX_COUNT, 1: TOKEN_MAX_COUNT}, id="new logicID should return max tokens"),
        pytest.param(2, {0: TOKEN_MAX_COUNT - 2}, id="after consume should return remaining tokens"),
        pytest.param(
            TOKEN_MAX_COUNT, {0: 0, 1: TOKEN_MAX_COUNT}, id="independent buckets should not affect each other"
        ),
    ],
)
def test_token_bucket_mgr_get_tokens(mgr: Mgr, consumes_of_0: int, tokens: dict[int, int]) -> None:
    """TestTokenBucketMgrGetTokens."""
    for _ in range(consumes_of_0):
        mgr.consume_token(0)
    assert {logic: mgr.get_tokens(logic) for logic in tokens} == tokens
