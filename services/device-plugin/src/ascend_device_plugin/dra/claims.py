"""Preparing a ResourceClaim: which of our chips its allocation names, and the CDI spec it gets.

Pure. Reference: component/ascend-dynamic-resource-allocation internal/plugin/state.go
(`prepareDevices`: every allocation result becomes a prepared device) and ascend-common/cdi
(spec.go `BuildSpec` / `GenerateClaimSpec`, devnode.go): one transient CDI spec per claim, kind
`ascend.com/npu`, a CDI device per chip named after its id, answered as `ascend.com/npu=<id>`.

Where we differ, on purpose:
- the reference prepares whatever the allocation lists; we check it first (the claim is the one
  the kubelet named, allocated, and every result of our driver names this node's pool and a chip
  we have) and refuse the claim as a whole, writing nothing, when one result is wrong;
- results of other drivers are theirs to prepare and are skipped; a claim with none of ours is refused;
- the spec carries the same environment as an Allocate of the same chips (`ASCEND_VISIBLE_DEVICES`,
  and the 950's `HCCL_TOPO_FILE_PATH`) besides the device nodes, so it works with or without
  the Ascend Docker Runtime;
- device nodes carry no major/minor: CDI fills them in from the host path when it injects them,
  so building the spec stats nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ascend_common.chips import ChipFamily

from ascend_device_plugin.allocation.response import AllocDevice, ContainerAlloc, DeviceNode, container_response
from ascend_device_plugin.dra.slice_devices import DRIVER

CDI_KIND: Final = "ascend.com/npu"  # ascend-common/cdi cdiKind
CDI_VENDOR, CDI_CLASS = CDI_KIND.split("/")
# 0.5.0 is the oldest CDI version with a host path on device nodes; runtimes refuse a spec newer
# than their CDI library knows (containerd 1.7 ships one that stops at 0.6.0), so the oldest that
# holds what we write is the one that loads everywhere. The reference writes 0.8.0.
CDI_VERSION: Final = "0.5.0"


class ClaimError(ValueError):
    """Why a claim cannot be prepared here: the per-claim error the kubelet is answered."""


@dataclass(frozen=True)
class ClaimDevice:
    """One allocation result of ours: the request it serves and our chip."""

    request: str
    device: str  # the device name in our pool, e.g. "ascend910-3"
    phy_id: int


def claim_devices(claim: Mapping[str, Any], *, uid: str, node: str, chips: Mapping[str, int]) -> list[ClaimDevice]:
    """Our chips in the claim's allocation; ClaimError when the claim is not one to prepare here.

    `claim` is the ResourceClaim object (any resource.k8s.io version: the allocation results have
    the same shape in v1beta1 and v1); `uid` the uid the kubelet asked for; `node` this node,
    whose name is our pool's; `chips` our device names -> phy id.
    """
    meta = claim.get("metadata") or {}
    key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    if meta.get("uid") != uid:
        raise ClaimError(f"claim {key} has uid {meta.get('uid')!r}, the kubelet asked for {uid!r}")
    allocation = (claim.get("status") or {}).get("allocation")
    if not isinstance(allocation, Mapping):
        raise ClaimError(f"claim {key} is not allocated")
    results = (allocation.get("devices") or {}).get("results") or []
    if not isinstance(results, Sequence):
        raise ClaimError(f"claim {key}: status.allocation.devices.results is not a list")
    ours: list[ClaimDevice] = []
    seen: set[str] = set()
    for result in results:
        if not isinstance(result, Mapping) or result.get("driver") != DRIVER:
            continue
        pool, device, request = result.get("pool"), result.get("device"), result.get("request", "")
        if pool != node:
            raise ClaimError(f"claim {key}: device {device!r} is in pool {pool!r}, not this node's ({node!r})")
        if not isinstance(device, str) or device not in chips:
            raise ClaimError(f"claim {key}: device {device!r} is not a chip of node {node!r}")
        if device in seen:
            raise ClaimError(f"claim {key}: device {device!r} is allocated twice")
        seen.add(device)
        ours.append(ClaimDevice(str(request), device, chips[device]))
    if not ours:
        raise ClaimError(f"claim {key}: its allocation names no device of driver {DRIVER}")
    return ours


def cdi_spec_name(claim_uid: str) -> str:
    """The transient spec's name (cdi GenerateNameForTransientSpec: `<vendor>-<class>_<uid>`)."""
    return f"{CDI_VENDOR}-{CDI_CLASS}_{claim_uid}"


def cdi_device_id(phy_id: int) -> str:
    return f"{CDI_KIND}={phy_id}"


def cdi_spec(
    devices: Sequence[ClaimDevice],
    *,
    family: ChipFamily,
    logic_by_phy: Mapping[int, int],
    host_dev_nodes: frozenset[str],
    ub_devices: Sequence[str] = (),
    hccl_topo: str | None = None,
) -> dict[str, Any]:
    """The claim's CDI spec: a device per chip (its /dev/davinci node), and for the whole claim the
    driver's shared nodes, the UB nodes and the environment an Allocate of the same chips gives."""
    allocs = [AllocDevice(d.device, d.phy_id) for d in devices]

    def alloc(chosen: list[AllocDevice], *, runtime_mode: bool, shared: bool) -> ContainerAlloc:
        return container_response(
            chosen, family=family, runtime_mode=runtime_mode, dynamic=False, logic_by_phy=logic_by_phy,
            hccl_topo=hccl_topo, host_dev_nodes=host_dev_nodes if shared else frozenset(),
            ub_devices=ub_devices if shared else (),
        )  # fmt: skip

    envs = alloc(allocs, runtime_mode=True, shared=False).envs
    cdi_devices = []
    own_nodes: set[DeviceNode] = set()
    for device, one in zip(devices, allocs, strict=True):
        nodes = alloc([one], runtime_mode=False, shared=False).devices
        own_nodes.update(nodes)
        cdi_devices.append({"name": str(device.phy_id), "containerEdits": {"deviceNodes": [_node(n) for n in nodes]}})
    shared = [_node(n) for n in alloc(allocs, runtime_mode=False, shared=True).devices if n not in own_nodes]
    edits: dict[str, Any] = {"env": [f"{k}={v}" for k, v in envs.items()]}
    if shared:
        edits["deviceNodes"] = shared
    return {"cdiVersion": CDI_VERSION, "kind": CDI_KIND, "devices": cdi_devices, "containerEdits": edits}


def _node(node: DeviceNode) -> dict[str, str]:
    return {"path": node.container_path, "hostPath": node.host_path, "permissions": node.permissions}
