"""The one backoff of the stack: the kube retries, the pod watch and the stream followers use it."""

from __future__ import annotations

from ascend_common.adapters.clients.backoff import Backoff


def nth_delay(n: int, base: float, cap: float) -> float:
    """The n-th delay of a fresh Backoff (what the n-th failure in a row waits)."""
    backoff = Backoff(base, cap)
    delays = [backoff.next() for _ in range(n)]
    assert backoff.attempts == n
    return delays[-1]


def test_backoff_grows_is_jittered_and_capped() -> None:
    samples = [nth_delay(n, 0.1, 1.0) for n in (1, 2, 3, 4, 10, 10_000)]
    assert 0.05 <= samples[0] <= 0.1 and 0.1 <= samples[1] <= 0.2 and 0.2 <= samples[2] <= 0.4
    assert all(0.5 <= s <= 1.0 for s in samples[4:])
    assert len({nth_delay(5, 0.1, 1.0) for _ in range(20)}) > 1


def test_reset_starts_over() -> None:
    backoff = Backoff(0.1, 1.0)
    for _ in range(5):
        backoff.next()
    backoff.reset()
    assert backoff.attempts == 0
    assert 0.05 <= backoff.next() <= 0.1
