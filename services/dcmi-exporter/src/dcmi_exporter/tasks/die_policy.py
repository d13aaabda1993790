"""The A3's multi-die policy, set once at start (the reference's `DoSetMultiDiePolicyForA3`).

With `--use-single-die-mode` an A3 chip's dies may go into containers one by one
(`dcmi_set_multi_die_policy(1)`); without it they go together (`(0)`), which the reference sets
explicitly too, so a node whose policy an earlier run changed gets the default back. Other
families are left alone. A failure (the call refused, the symbol missing, a hung call) is logged
and the exporter goes on, as the reference does.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol, runtime_checkable

from ascend_common.chip_traits import traits

from dcmi_exporter.backends.errors import DcmiError
from dcmi_exporter.node.calls import CallGuard
from dcmi_exporter.node.poller import ChipPoller

log = logging.getLogger(__name__)

MULTI_DIE_UNION: Final = 0  # DCMI_MULTI_DIE_UNION_POLICY
MULTI_DIE_INDEP: Final = 1  # DCMI_MULTI_DIE_INDEP_POLICY
DIE_POLICY_KEY: Final = "die-policy"  # its own key in the call pool: a hung call blocks nothing else


@runtime_checkable
class DiePolicyBackend(Protocol):
    """A backend that can set the policy (the dcmi one; the simulator has no dies to split)."""

    def set_multi_die_policy(self, policy: int) -> None: ...


def die_policy(single_die: bool) -> int:
    return MULTI_DIE_INDEP if single_die else MULTI_DIE_UNION


async def apply_die_policy(poller: ChipPoller, backend: object, guard: CallGuard, single_die: bool) -> int | None:
    """Set the policy once the chips are known; the policy set, or None when nothing was set."""
    await poller.discovered.wait()
    if not isinstance(backend, DiePolicyBackend):
        return None
    if not any(chip.family is not None and traits(chip.family).die_policy for chip in poller.snapshot.chips):
        return None
    policy = die_policy(single_die)
    try:
        await guard.call(DIE_POLICY_KEY, lambda: backend.set_multi_die_policy(policy))
    except DcmiError as exc:
        log.warning(
            "setting the multi-die policy failed", extra={"policy": policy, "error": str(exc), "code": exc.code}
        )
        return None
    log.info("multi-die policy set", extra={"policy": policy, "single_die_mode": single_die})
    return policy
