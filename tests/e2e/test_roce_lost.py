"""Drill (issue 26 item 2, "RoCE polling"): the exporter over the C double of libdcmi.so built without the
fault subscription (an older driver: the exporter polls) and a fake `hccn_tool` that reports one chip's
RoCE link DOWN; the library lists no code for it (the event was lost). The exporter finds it: one
81078603 (source `roce`) on that chip; the fault-manager's FaultDuration (20 s) then puts the chip's
network in PreSeparateNPU, so the device-info ConfigMap lists it in `-NetworkUnhealthy` while the
chip stays schedulable. Later polls within 5 minutes neither read the link again nor add anything."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

from tests.cdouble.fixtures import cdouble_build_dir, dcmi_double_nosub_path  # noqa: F401 - pytest fixtures
from tests.e2e.stack import CM_PATH, DEVICE_INFO, NODE, SCALE, R
from tests.support.exporter import TOKENS, event_stream, running_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.faultmanager import start_fault_manager
from tests.support.faultmanager import wait_ready as fm_ready
from tests.support.waiting import START_S, until

LINK_DOWN = "81078603"
DOWN_PHY = 3  # the double's default layout: logic 1 is phy 3
DOWN_CHIP = f"Ascend910-{DOWN_PHY}"


def fake_hccn(tmp_path: Path) -> tuple[Path, Path]:
    calls = tmp_path / "hccn-calls"
    path = tmp_path / "hccn_tool"
    path.write_text(
        f"""#!/bin/sh
echo "$*" >> {calls}
case "$*" in
  "-i {DOWN_PHY} -link -g") echo "link status: DOWN" ;;
  "-i "*" -link -g") echo "link status: UP" ;;
  *) exit 2 ;;
esac
"""
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, calls


def network_unhealthy(api: FakeApiServer) -> set[str] | None:
    cm = api.get_object("configmaps", DEVICE_INFO, "kube-system")
    if not cm or "DeviceInfoCfg" not in cm.get("data", {}):
        return None
    device_list: dict[str, str] = json.loads(cm["data"]["DeviceInfoCfg"])["DeviceInfo"]["DeviceList"]
    return {n for n in device_list.get(f"{R}-NetworkUnhealthy", "").split(",") if n}


async def test_subscription_failed_and_a_link_down_from_hccn_tool_is_one_81078603_and_network_unhealthy(
    dcmi_double_nosub_path: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    tool, calls = fake_hccn(tmp_path)
    config = tmp_path / "double.conf"
    config.write_text("# the default layout, no codes listed\n")
    args = ("--library", str(dcmi_double_nosub_path), "--hccn-tool", str(tool))
    env = {"DCMI_DOUBLE_CONFIG": str(config)}
    with (
        running_exporter(tmp_path / "exporter", *args, backend="dcmi", env=env) as exporter,
        FakeApiServer() as api,
    ):
        api.add_node(NODE)
        kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", api.url))
        token = tmp_path / "fm-token"
        token.write_text(f"{TOKENS['reset'][0]} reset\n")
        f_args = ("--kubeconfig", kubeconfig, "--time-scale", str(SCALE), "--token-file", str(token))
        fm = start_fault_manager(tmp_path / "fm", exporter, *f_args, kube="api")
        try:
            await fm_ready(fm, timeout=START_S)
            async with exporter.client() as client:
                node = (await client.get("/v1/node")).json()
                assert node["backend"] == "dcmi" and node["subscription"] == "polling", node
                chips = {c["name"]: c for c in (await client.get("/v1/chips")).json()["chips"]}
                assert chips[DOWN_CHIP]["logic_id"] != DOWN_PHY, "the link is asked by phy id"

                async def listed() -> dict[str, Any] | None:
                    chip = (await client.get(f"/v1/chips/{chips[DOWN_CHIP]['logic_id']}")).json()
                    return chip if chip["dynamic"]["error_codes"]["value"] == [LINK_DOWN] else None

                await until(listed, 10, "81078603 on the chip whose link is down")

                async def verdict() -> dict[str, Any]:
                    async with fm.client() as fmc:
                        body = (await fmc.get("/v1/verdicts")).json()
                    return {v["chip"]: v for v in body["verdicts"]}[DOWN_CHIP]  # type: ignore[no-any-return]

                async def pre_separated() -> bool:
                    return bool((await verdict())["network_level"] == "PreSeparateNPU")

                await until(pre_separated, 60 / SCALE + 10, "the chip's network PreSeparateNPU after FaultDuration")
                v = await verdict()
                assert (v["network_healthy"], v["schedulable"], v["fault_level"]) == (False, True, "NormalNPU"), v
                await until(lambda: network_unhealthy(api) == {DOWN_CHIP}, 10, "-NetworkUnhealthy in the ConfigMap")
                assert api.count("PUT", CM_PATH) + api.count("POST", CM_PATH) > 0

                await asyncio.sleep(1.0)  # five more polls and RoCE rounds (0.2 s each), well within 5 minutes
                link_reads = calls.read_text().splitlines().count(f"-i {DOWN_PHY} -link -g")
                assert link_reads == 1, f"the link read {link_reads} times within 5 minutes"
                for other in chips.values():
                    want = [LINK_DOWN] if other["name"] == DOWN_CHIP else []
                    got = (await client.get(f"/v1/chips/{other['logic_id']}")).json()
                    assert got["dynamic"]["error_codes"]["value"] == want, other["name"]
                head = (await client.get("/v1/node")).json()["last_event_id"]
                async with event_stream(client, f"{head.rpartition('-')[0]}-0") as stream:
                    faults = []
                    async with asyncio.timeout(10):
                        async for msg in stream:
                            if msg.event == "fault":
                                faults.append(json.loads(msg.data))
                            if msg.id == head:
                                break
                roce = [f for f in faults if f["fault"]["code"] == LINK_DOWN]
                assert len(roce) == 1, roce
                assert (roce[0]["phy_id"], roce[0]["fault"]["assertion"], roce[0]["fault"]["source"]) == (
                    DOWN_PHY,
                    "occur",
                    "roce",
                )
        finally:
            assert fm.stop() == 0
