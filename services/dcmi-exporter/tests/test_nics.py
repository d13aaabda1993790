"""--npu-nic-mapping -> NodeInfo.nic_addresses (issue 25 part A): the reference's mapping file, the
host's addresses of the NICs it names, and their refresh."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ascend_common.adapters.lifecycle import TaskScope
from ascend_common.clock import SystemClock
from ascend_common.schemas.exporter import EventType, NodeInfo
from ascend_common.tokens import TokenTable
from dcmi_exporter.backends.sim import SimBackend
from dcmi_exporter.runtime import Exporter
from dcmi_exporter.settings import ExporterSettings
from dcmi_exporter.tasks.nics import (
    NicAddressTask,
    NpuNicMapping,
    host_addresses,
    link_name,
    load_mapping,
    mapped_addresses,
)

# The reference's shipped file (component/ascend-device-plugin/build/npu-nic-mapping.json), first two rows.
REFERENCE_FILE = {
    "npuNics": [
        {"npuId": 0, "nicNames": ["ens0f0", "ens0f2", "ens1f0"]},
        {"npuId": 1, "nicNames": ["ens1f0", "ens1f2", "ens0f0"]},
    ]
}


def write(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "npu-nic-mapping.json"
    path.write_text(content)
    return path


def test_the_reference_file_loads_and_names_each_nic_once_in_order(tmp_path: Path) -> None:
    mapping = load_mapping(write(tmp_path, json.dumps(REFERENCE_FILE)))
    assert mapping is not None
    assert [(i.npuId, i.nicNames) for i in mapping.npuNics] == [
        (0, ["ens0f0", "ens0f2", "ens1f0"]),
        (1, ["ens1f0", "ens1f2", "ens0f0"]),
    ]
    assert mapping.nic_names() == ["ens0f0", "ens0f2", "ens1f0", "ens1f2"]


def test_unknown_keys_are_ignored_as_go_does(tmp_path: Path) -> None:
    mapping = load_mapping(write(tmp_path, '{"npuNics": [{"npuId": 3, "nicNames": ["a"], "x": 1}], "v": 2}'))
    assert mapping is not None and mapping.nic_names() == ["a"]


def test_missing_file_is_none_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert load_mapping(tmp_path / "absent.json") is None
    assert any(r.getMessage().startswith("npu-nic-mapping file not found") for r in caplog.records)


@pytest.mark.parametrize("content", ["{", "[]", '{"npuNics": [{"nicNames": ["a"]}]}', '{"npuNics": "x"}'])
def test_a_bad_file_is_none_with_an_error(tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str) -> None:
    assert load_mapping(write(tmp_path, content)) is None
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert errors and getattr(errors[0], "path", None) == str(tmp_path / "npu-nic-mapping.json")


def test_must_show_l3_inputs_every_mapped_nic_with_its_addresses_unfiltered() -> None:
    """Issue 25: mapping 1 -> [ens1f0, ens1f2]; ens1f0 has only fe80::1, ens1f2 10.0.0.7. The exporter
    serves both as they are; the rank-level builder skips the link-local one."""
    mapping = NpuNicMapping.model_validate({"npuNics": [{"npuId": 1, "nicNames": ["ens1f0", "ens1f2", "ens9"]}]})
    host = {"ens1f0": ["fe80::1"], "ens1f2": ["10.0.0.7", "fd00::7"], "eth0": ["192.0.2.1"]}
    assert mapped_addresses(mapping, host) == {"ens1f0": ["fe80::1"], "ens1f2": ["10.0.0.7", "fd00::7"], "ens9": []}


@pytest.mark.parametrize(("label", "link"), [("ens1f2", "ens1f2"), ("ens1f2:1", "ens1f2"), ("lo", "lo")])
def test_an_alias_label_counts_for_its_link(label: str, link: str) -> None:
    assert link_name(label) == link


def test_host_addresses_has_loopback() -> None:
    addrs = host_addresses()
    assert "127.0.0.1" in addrs["lo"]


@pytest.mark.skipif(shutil.which("ip") is None, reason="no iproute2 to compare with")
def test_host_addresses_agree_with_iproute2() -> None:
    """The same addresses, in the same order, as `ip -j addr` lists (both read the kernel's netlink dump)."""
    out = subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True, check=True, timeout=10).stdout
    expected: dict[str, list[str]] = {}
    for link in json.loads(out):
        for info in link.get("addr_info", []):
            if info.get("family") in ("inet", "inet6"):
                expected.setdefault(link["ifname"], []).append(info["local"])
    ours = host_addresses()
    assert {k: sorted(v) for k, v in ours.items()} == {k: sorted(v) for k, v in expected.items()}


# A node payload from an exporter before NodeInfo.nic_addresses / npu_nics.
_OLD_NODE: dict[str, object] = {
    "backend": "sim",
    "profile": None,
    "run_id": "r",
    "dcmi_version": {"status": "ok", "value": "1"},
    "card_count": 0,
    "chip_count": 0,
    "chips_by_state": {},
    "subscription": "live",
    "poll_period_s": 1.0,
    "started_at": 0.0,
    "updated_at": 0.0,
    "last_event_id": None,
}


class Sink:
    def __init__(self) -> None:
        self.values: list[dict[str, list[str]] | None] = []
        self.npu_nics: list[dict[int, list[str]]] = []

    def set_nic_addresses(self, addresses: dict[str, list[str]] | None) -> None:
        self.values.append(addresses)

    def set_npu_nics(self, npu_nics: dict[int, list[str]]) -> None:
        self.npu_nics.append(npu_nics)


def unstarted() -> TaskScope:
    """The scope of a task these tests drive by hand (never started)."""
    return TaskScope("nics", lambda task: None)


def test_task_reads_the_mapping_once_and_the_addresses_each_refresh(tmp_path: Path) -> None:
    answers = [{"ens1f2": ["10.0.0.7"]}, {"ens1f2": ["10.0.0.8"]}]

    def read_host() -> dict[str, list[str]]:
        if not answers:
            raise OSError(105, "no buffer space")
        return answers.pop(0)

    sink = Sink()
    task = NicAddressTask(write(tmp_path, json.dumps(REFERENCE_FILE)), sink, unstarted(), read_host=read_host)

    async def scenario() -> None:
        assert await task.load()
        (tmp_path / "npu-nic-mapping.json").unlink()  # read once: a later change is not seen
        for _ in range(3):
            await task.refresh()

    asyncio.run(scenario())
    empty: list[str] = []
    assert sink.values == [
        {"ens0f0": empty, "ens0f2": empty, "ens1f0": empty, "ens1f2": ["10.0.0.7"]},
        {"ens0f0": empty, "ens0f2": empty, "ens1f0": empty, "ens1f2": ["10.0.0.8"]},
    ]  # the failed third read keeps the second answer
    assert sink.npu_nics == [{0: ["ens0f0", "ens0f2", "ens1f0"], 1: ["ens1f0", "ens1f2", "ens0f0"]}]


def test_task_without_a_file_serves_nothing(tmp_path: Path) -> None:
    sink = Sink()
    task = NicAddressTask(tmp_path / "absent.json", sink, unstarted(), read_host=lambda: {"lo": ["127.0.0.1"]})
    assert asyncio.run(task.load()) is False
    asyncio.run(task.refresh())  # nothing to serve: the node keeps no addresses
    assert sink.values == [] and sink.npu_nics == []


def test_npu_nics_keeps_the_first_row_of_a_repeated_npu_as_get_npu_to_nic_names() -> None:
    mapping = NpuNicMapping.model_validate(
        {"npuNics": [{"npuId": 2, "nicNames": ["a", "b"]}, {"npuId": 2, "nicNames": ["c"]}, {"npuId": 0}]}
    )
    assert mapping.npu_nics() == {2: ["a", "b"], 0: []}


def test_npu_nics_round_trip_through_node_json() -> None:
    """JSON object keys are strings: the ids come back as ints, in the file's order."""
    base = NodeInfo.model_validate(_OLD_NODE)
    node = base.model_copy(update={"npu_nics": {1: ["ens1f0"], 0: ["ens0f0", "ens0f2"]}})
    back = NodeInfo.model_validate_json(node.model_dump_json())
    assert back.npu_nics == {1: ["ens1f0"], 0: ["ens0f0", "ens0f2"]}
    assert list(back.npu_nics) == [1, 0]
    assert base.npu_nics is None


def test_old_node_payloads_parse_without_the_field() -> None:
    node = NodeInfo.model_validate(_OLD_NODE)
    assert node.nic_addresses is None
    assert node.npu_nics is None


def test_a_change_of_the_nic_addresses_is_one_node_event_and_a_repeat_none() -> None:
    """The plugin re-renders the levelList it builds from the addresses when it sees this event,
    rather than at its next re-sync: each change is one `node` event, an unchanged refresh none."""
    clock = SystemClock()
    exporter = Exporter(ExporterSettings(), SimBackend("a5-superpod-8", clock=clock), clock, TokenTable())
    poller, events = exporter.poller, exporter.events
    first = {"ens1f2": ["10.0.0.7"]}
    poller.set_nic_addresses(first)
    poller.set_nic_addresses({"ens1f2": ["10.0.0.7"]})  # the same answer again
    head = events.head_seq
    poller.set_nic_addresses({"ens1f2": ["10.0.0.8"]})
    stored = events.after(0) or []
    assert [s.item.type for s in stored] == [EventType.NODE, EventType.NODE]
    assert all(s.item.logic_id is None for s in stored), "no chip changed"
    assert events.head_seq == head + 1
    node = poller.snapshot.node
    assert node.nic_addresses == {"ens1f2": ["10.0.0.8"]}
    assert node.last_event_id == events.head_id, "the node says it reflects the event"
