"""Soft share's pod annotations (Volcano `chip1softsharedev`), as both the plugin and the fault-manager read them.

Volcano (ascend-for-volcano `setSchedulerShareAnnoToPod`) copies a job's quotas onto its pods; the
plugin records the vid it chose in `VNPU_ID` (defined by the reference's api package and Volcano,
written by neither). A pod carrying the AI-core quota is a soft-share pod: its kltDev ids are
anonymous slots, 100 per chip, and name no chip.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

AICORE_QUOTA = "huawei.com/scheduler.softShareDev.aicoreQuota"  # percent of the chip's AI cores, 1-100
HBM_QUOTA = "huawei.com/scheduler.softShareDev.hbmQuota"  # MB
SCHEDULING_POLICY = "huawei.com/scheduler.softShareDev.policy"
VNPU_ID = "huawei.com/scheduler.softShareDev.vnpuId"
# common.ConvertSchedulingPolicyToIntStr (api.SoftShareDeviceSchedulingPolicy*): the numbers the
# runtime reads; any other value, a number too, is no policy.
SCHEDULING_POLICIES: Mapping[str, int] = MappingProxyType({"fixed-share": 1, "elastic": 2, "best-effort": 3})
MAX_AICORE_QUOTA = 100  # api.SoftShareDeviceMaxAICoreQuota: the whole chip


def is_soft_share(annotations: Mapping[str, str]) -> bool:
    """A soft-share pod: Volcano gave it an AI-core quota."""
    return AICORE_QUOTA in annotations
