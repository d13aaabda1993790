"""The slow-node notice: ConfigMap kube-system/steptime-dtpgroup, read at each Allocate as the
reference does."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ascend_common.adapters.inputs import BadInputs
from ascend_common.adapters.kube.client import core_v1, json_of
from ascend_common.jsonin import InputError

from ascend_device_plugin.allocation.response import SLOW_NODE_CONFIGMAP, parse_slow_node
from ascend_device_plugin.kube.connection import ApiConnection

log = logging.getLogger(__name__)
SLOW_NODE_INPUT = "slow_node_configmap"  # its name in /readyz bad_inputs
SLOW_NODE_READ_S = 2.0  # inside Allocate: a slow apiserver must not stall admissions for long


@dataclass
class SlowNodeNotice:
    connection: ApiConnection
    bad_inputs: BadInputs = field(default_factory=BadInputs)  # the plugin's /readyz names them

    async def envs(self) -> dict[str, str]:
        """PERF_DUMP_PATH / PERF_DUMP_CONFIG from the ConfigMap; nothing when it is missing, unreadable
        or malformed."""
        namespace, name = SLOW_NODE_CONFIGMAP
        read = core_v1(self.connection.client).read_namespaced_config_map
        try:
            body = await json_of(await read(name, namespace, timeout=SLOW_NODE_READ_S))
        except Exception as exc:  # a notice, not a condition of the allocation
            log.debug("no slow-node notice", extra={"configmap": f"{namespace}/{name}", "error": str(exc)})
            return {}
        data = body.get("data") if isinstance(body, dict) else None
        try:
            if not isinstance(data, dict):
                raise InputError(f"{namespace}/{name}: data is not a map")
            envs = parse_slow_node(data)
        except InputError as exc:
            # Read at each Allocate: logged when the reason is new, not every time.
            self.bad_inputs.refused(SLOW_NODE_INPUT, str(exc), "step time configmap unreadable; no slow-node notice")
            return {}
        self.bad_inputs.accepted(SLOW_NODE_INPUT)
        return envs
