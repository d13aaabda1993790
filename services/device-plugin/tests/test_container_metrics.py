"""npu-exporter's container families from a PodResources listing and the exporter's chips (the pure
families), the sampling task's rules (a hung source delays no scrape), and npu-exporter's tests of the
container map and the card labels, ported (collector/metrics/common_utils_test.go,
collector/common/collector_for_container_test.go, collector/metrics/collector_for_hbm_test.go)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from ascend_common.cardlabel import NOT_DISPLAYED_FOR_MULTI_POD
from ascend_common.schemas.exporter import Chip, ChipState, ContainerMapping, Hbm, Utilization, Vnpu
from ascend_common.schemas.reading import Reading
from ascend_device_plugin.container_metrics.families import (
    CARD_LABELS,
    FAMILIES,
    INFO,
    INFO_LABELS,
    TOTAL_MEMORY,
    USED_MEMORY,
    UTILIZATION,
    ContainerDevices,
    ContainerRef,
    Sample,
    container_labels,
    container_map,
    container_samples,
)
from ascend_device_plugin.container_metrics.sampler import ContainerMetrics, ExporterHolders
from prometheus_client import CollectorRegistry, generate_latest

from tests.support.chips import exporter_chip

R910 = "huawei.com/Ascend910"


def reading_chip(
    phy: int,
    *,
    util: int | None = 37,
    hbm: tuple[int, int] | None = (65536, 1024),
    state: ChipState = ChipState.OK,
    vdie: str | None = "00000001-0000ABCD-00000000-00000000-00000012",
    name: str = "910B3",
    board: int = 0x22,
) -> Chip:
    """A chip with AI-core utilization and HBM (total, used) readings, or none where None."""
    chip = exporter_chip(phy, phy, vdie=vdie, state=state, name=name, board=board)
    assert chip.dynamic is not None
    dyn = chip.dynamic.model_copy(
        update={
            "utilization": Reading.ok(Utilization(aicore_pct=util)) if util is not None else Reading.error(-8255),
            "hbm": Reading.ok(Hbm(total_mb=hbm[0], used_mb=hbm[1])) if hbm is not None else Reading.error(-8255),
        }
    )
    return chip.model_copy(update={"dynamic": dyn})


def row(ns: str, pod: str, ctr: str, *ids: str, resource: str = R910) -> ContainerDevices:
    return ContainerDevices(ns, pod, ctr, resource, ids)


VDIE = "00000001-0000ABCD-00000000-00000000-00000012"


def card(phy: int, ns: str, pod: str, ctr: str) -> tuple[str, ...]:
    return (str(phy), "Ascend910B3", VDIE, "", ns, pod, ctr)


def values(
    phy: int, ns: str, pod: str, ctr: str, util: float = 37, total: float = 65536, used: float = 1024
) -> list[Sample]:
    labels = card(phy, ns, pod, ctr)
    return [Sample(TOTAL_MEMORY, labels, total), Sample(USED_MEMORY, labels, used), Sample(UTILIZATION, labels, util)]


def info(phy: int, ns: str, pod: str, ctr: str) -> Sample:
    return Sample(INFO, (*card(phy, ns, pod, ctr), "", f"{ns}_{pod}_{ctr}"), 1.0)


# (case, listing, chips, AscendReal by pod, expected samples)
CASES: list[tuple[str, list[ContainerDevices], list[Chip], dict[tuple[str, str], str], list[Sample]]] = [
    ("no container holds a chip", [], [reading_chip(0)], {}, []),
    (
        "one container, two chips: info, memory and utilization per chip, in phy order",
        [row("ns", "train", "main", "Ascend910-1", "Ascend910-0")],
        [reading_chip(1, util=80), reading_chip(0)],
        {},
        [
            info(0, "ns", "train", "main"),
            *values(0, "ns", "train", "main"),
            info(1, "ns", "train", "main"),
            *values(1, "ns", "train", "main", util=80),
        ],
    ),
    (
        "two containers of one pod, a chip each",
        [row("ns", "p", "a", "Ascend910-0"), row("ns", "p", "b", "Ascend910-1")],
        [reading_chip(0), reading_chip(1)],
        {},
        [info(0, "ns", "p", "a"), *values(0, "ns", "p", "a"), info(1, "ns", "p", "b"), *values(1, "ns", "p", "b")],
    ),
    (
        "a chip two containers hold (shared copies): no container series for it",
        [
            row("ns", "p1", "c", "Ascend310P-0-0", resource="huawei.com/Ascend310P"),
            row("ns", "p2", "c", "Ascend310P-0-1", resource="huawei.com/Ascend310P"),
        ],
        [reading_chip(0)],
        {},
        [],
    ),
    (
        "one container holding two copies of a chip counts once",
        [row("ns", "p", "c", "Ascend310P-0-0", "Ascend310P-0-1", resource="huawei.com/Ascend310P")],
        [reading_chip(0)],
        {},
        [info(0, "ns", "p", "c"), *values(0, "ns", "p", "c")],
    ),
    (
        "a chip the exporter does not list has no series",
        [row("ns", "p", "c", "Ascend910-5")],
        [reading_chip(0)],
        {},
        [],
    ),
    (
        "another vendor's resource and an unparsable id are not ours",
        [
            row("ns", "p", "c", "gpu-0", resource="nvidia.com/gpu"),
            row("ns", "p", "d", "npu-core-3", resource="huawei.com/npu-core"),
            row("ns", "p", "e", "0", resource="example.com/Ascend910"),
        ],
        [reading_chip(0)],
        {},
        [],
    ),
    (
        "unread readings: info only (validateNum drops them)",
        [row("ns", "p", "c", "Ascend910-0")],
        [reading_chip(0, util=None, hbm=None)],
        {},
        [info(0, "ns", "p", "c")],
    ),
    (
        "a utilization reading without the AI core: memory only",
        [row("ns", "p", "c", "Ascend910-0")],
        [reading_chip(0, util=None)],
        {},
        [info(0, "ns", "p", "c"), *values(0, "ns", "p", "c")[:2]],
    ),
    (
        "a chip that did not answer: info only",
        [row("ns", "p", "c", "Ascend910-0")],
        [reading_chip(0, state=ChipState.UNKNOWN)],
        {},
        [info(0, "ns", "p", "c")],
    ),
    (
        "a vNPU: info with the chip's id, no values (vnpu not support this metrics)",
        [row("ns", "p", "c", "Ascend910-4c-100-0", resource="huawei.com/Ascend910-4c")],
        [reading_chip(0)],
        {},
        [info(0, "ns", "p", "c")],
    ),
    (
        "a chip's own container and a vNPU's container on it",
        [
            row("ns", "whole", "c", "Ascend910-0"),
            row("ns", "v", "c", "Ascend910-4c-100-0", resource="huawei.com/Ascend910-4c"),
        ],
        [reading_chip(0)],
        {},
        [info(0, "ns", "whole", "c"), *values(0, "ns", "whole", "c"), info(0, "ns", "v", "c")],
    ),
    (
        "Volcano path: the pod's AscendReal names the chips, not the kubelet's ids",
        [row("ns", "vc", "main", "Ascend910-0", "Ascend910-1")],
        [reading_chip(0), reading_chip(2), reading_chip(3)],
        {("ns", "vc"): "Ascend910-2,Ascend910-3"},
        [
            info(2, "ns", "vc", "main"),
            *values(2, "ns", "vc", "main"),
            info(3, "ns", "vc", "main"),
            *values(3, "ns", "vc", "main"),
        ],
    ),
    (
        "AscendReal of a pod with two NPU containers: the kubelet's ids (the split is unknown)",
        [row("ns", "vc", "a", "Ascend910-0"), row("ns", "vc", "b", "Ascend910-1")],
        [reading_chip(0), reading_chip(1), reading_chip(2)],
        {("ns", "vc"): "Ascend910-1,Ascend910-2"},
        [info(0, "ns", "vc", "a"), *values(0, "ns", "vc", "a"), info(1, "ns", "vc", "b"), *values(1, "ns", "vc", "b")],
    ),
    (
        "dynamic vNPU mode: npu-core ids, the real vNPU (with its vfg id) from AscendReal",
        [row("ns", "dyn", "c", "npu-core-0", "npu-core-1", resource="huawei.com/npu-core")],
        [reading_chip(1)],
        {("ns", "dyn"): "Ascend910-2c-101-1_0"},
        [info(1, "ns", "dyn", "c")],
    ),
    (
        "310P mixed insert: the product resource's ids (<resource>-<phy>)",
        [row("ns", "p", "c", "Ascend310P-V-2", resource="huawei.com/Ascend310P-V")],
        [reading_chip(2)],
        {},
        [info(2, "ns", "p", "c"), *values(2, "ns", "p", "c")],
    ),
    (
        "a 950 chip (resource npu, ids npu-<phy>)",
        [row("ns", "p", "c", "npu-4", resource="huawei.com/npu")],
        [reading_chip(4, name="Ascend950DT", board=0x50, vdie=None)],
        {},
        [
            Sample(INFO, ("4", "AscendAscend950DT", "", "", "ns", "p", "c", "", "ns_p_c"), 1.0),
            Sample(TOTAL_MEMORY, ("4", "AscendAscend950DT", "", "", "ns", "p", "c"), 65536),
            Sample(USED_MEMORY, ("4", "AscendAscend950DT", "", "", "ns", "p", "c"), 1024),
            Sample(UTILIZATION, ("4", "AscendAscend950DT", "", "", "ns", "p", "c"), 37),
        ],
    ),
]


@pytest.mark.parametrize(("case", "listing", "chips", "real", "expected"), CASES, ids=[c[0] for c in CASES])
def test_container_samples(
    case: str,
    listing: list[ContainerDevices],
    chips: list[Chip],
    real: dict[tuple[str, str], str],
    expected: list[Sample],
) -> None:
    assert container_samples(listing, chips, real) == expected


VOLCANO_CASES: list[tuple[str, list[ContainerDevices], dict[tuple[str, str], str], list[Sample]]] = [
    (
        "the annotation known: its chips",
        [row("ns", "vc", "main", "Ascend910-0")],
        {("ns", "vc"): "Ascend910-1"},
        [info(1, "ns", "vc", "main"), *values(1, "ns", "vc", "main")],
    ),
    (
        "the annotation not known yet: nothing (the kubelet's ids are not the chips)",
        [row("ns", "vc", "main", "Ascend910-0")],
        {},
        [],
    ),
    (
        "two NPU containers: nothing for the chips, the vNPUs as the kubelet gave them",
        [
            row("ns", "vc", "a", "Ascend910-0"),
            row("ns", "vc", "b", "Ascend910-4c-100-1", resource="huawei.com/Ascend910-4c"),
        ],
        {("ns", "vc"): "Ascend910-1"},
        [info(1, "ns", "vc", "b")],
    ),
]


@pytest.mark.parametrize(("case", "listing", "real", "expected"), VOLCANO_CASES, ids=[c[0] for c in VOLCANO_CASES])
def test_container_samples_with_volcano_type(
    case: str, listing: list[ContainerDevices], real: dict[tuple[str, str], str], expected: list[Sample]
) -> None:
    chips = [reading_chip(0), reading_chip(1)]
    assert container_samples(listing, chips, real, kubelet_chips=False) == expected


def test_container_samples_without_fresh_readings_serve_info_only() -> None:
    listing = [row("ns", "p", "c", "Ascend910-0")]
    assert container_samples(listing, [reading_chip(0)], with_values=False) == [info(0, "ns", "p", "c")]


def test_labels_are_npu_exporters() -> None:
    assert CARD_LABELS == ("id", "model_name", "vdie_id", "pcie_bus_info", "namespace", "pod_name", "container_name")
    assert INFO_LABELS == (
        "npuID", "model_name", "vdie_id", "pcie_bus_info", "namespace", "pod_name", "container_name",
        "containerID", "containerName",
    )  # fmt: skip


# ---- ported from npu-exporter (named after the Go tests) -------------------------------------


@pytest.mark.parametrize(
    ("holders", "expected"),
    [
        ([ContainerRef("ns", "pod", "container")], ("ns", "pod", "container")),
        ([], ("", "", "")),
    ],
)
def test_container_info(holders: list[ContainerRef], expected: tuple[str, str, str]) -> None:
    """TestContainerInfo (getContainerInfoWithDefault): a well-formed name splits into its three
    parts, a short one gives empty labels (ours: no holder)."""
    assert container_labels(holders) == expected


def test_card_label() -> None:
    """TestCardLabel (collectCardLabelValue): id, model, VDIE, PCIe bus, namespace, pod, container;
    our model name and PCIe bus are the exporter's (`Ascend<chip name>`, empty)."""
    chip = reading_chip(0, vdie="die1")
    [sample, *_] = container_samples([row("test-ns", "test-pod", "test-container", "Ascend910-0")], [chip])
    assert sample.labels[: len(CARD_LABELS)] == (
        "0",
        "Ascend910B3",
        "die1",
        "",
        "test-ns",
        "test-pod",
        "test-container",
    )


@pytest.mark.parametrize(
    ("case", "listing", "key", "expected"),
    [
        ("should return one container info", [row("ns", "pod", "container1", "Ascend910-0")], (0, None),
         [ContainerRef("ns", "pod", "container1")]),
        ("should return multiple container infos",
         [row("ns", "pod", "container1", "Ascend910-0"), row("ns", "pod", "container2", "Ascend910-0")], (0, None),
         [ContainerRef("ns", "pod", "container1"), ContainerRef("ns", "pod", "container2")]),
        ("should return empty when no container for device", [row("ns", "pod", "container1", "Ascend910-1")],
         (0, None), []),
        ("should use VDevID when chip is virtual device",
         [row("ns", "pod", "vdevContainer", "Ascend310P-1c-2-0", resource="huawei.com/Ascend310P-1c")], (0, 2),
         [ContainerRef("ns", "pod", "vdevContainer")]),
    ],
)  # fmt: skip
def test_geen_container_infos(
    case: str, listing: list[ContainerDevices], key: tuple[int, int | None], expected: list[ContainerRef]
) -> None:
    """TestGeenContainerInfos: a chip's containers, by its id, or by its vNPU's vdev id."""
    assert container_map(listing).get(key, []) == expected


@pytest.mark.parametrize(
    ("case", "listing", "expected"),
    [
        ("should show podName when one card one container",
         [row("test-ns", "test-pod", "test-container", "Ascend910-0")], ("test-ns", "test-pod", "test-container")),
        ("should show description labels when one card multiple containers",
         [row("ns1", "pod1", "container1", "Ascend910-0"), row("ns2", "pod2", "container2", "Ascend910-0")],
         (NOT_DISPLAYED_FOR_MULTI_POD,) * 3),
        ("should return empty container labels when no container", [], ("", "", "")),
    ],
)  # fmt: skip
def test_geen_general_card_label(case: str, listing: list[ContainerDevices], expected: tuple[str, str, str]) -> None:
    """TestGeenGeneralCardLabel: the namespace / pod / container labels of a chip."""
    assert container_labels(container_map(listing).get((0, None), [])) == expected


def test_get_container_npu_info() -> None:
    """TestGetContainerNPUInfo: every device of every container, mapped to its containers
    (container 1 holds devices 0 and 1, container 2 device 2)."""
    listing = [row("ns", "p1", "c1", "Ascend910-0", "Ascend910-1"), row("ns", "p2", "c2", "Ascend910-2")]
    one, two = ContainerRef("ns", "p1", "c1"), ContainerRef("ns", "p2", "c2")
    assert container_map(listing) == {(0, None): [one], (1, None): [one], (2, None): [two]}


@pytest.mark.parametrize(
    ("case", "chip", "listing", "expected_families"),
    [
        ("when vnpu is nil and with container info", reading_chip(0), [row("ns", "p", "c", "Ascend910-0")],
         [INFO, TOTAL_MEMORY, USED_MEMORY, UTILIZATION]),
        ("when chip is vnpu", reading_chip(0),
         [row("ns", "p", "c", "Ascend910-4c-132-0", resource="huawei.com/Ascend910-4c")], [INFO]),
        ("when extInfo.HbmInfo is nil", reading_chip(0, hbm=None), [row("ns", "p", "c", "Ascend910-0")],
         [INFO, UTILIZATION]),
    ],
)  # fmt: skip
def test_update_hbm_info(case: str, chip: Chip, listing: list[ContainerDevices], expected_families: list[str]) -> None:
    """TestUpdateHbmInfo, its container part: HBM total / used for a container's chip, none for a
    vNPU or without an HBM reading. (Its "not 910 series" case reads DDR, which the exporter does
    not serve: see docs/wire-formats.md.)"""
    assert [s.family for s in container_samples(listing, [chip])] == expected_families


# ---- the sampling task -----------------------------------------------------------------------


async def hang(timeout: float) -> Sequence[ContainerDevices]:
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


def scrape(collector: ContainerMetrics) -> str:
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


async def test_a_hung_source_delays_no_scrape_and_its_last_answer_is_kept() -> None:
    listing: list[ContainerDevices] = [row("ns", "p", "c", "Ascend910-0")]
    chips = [reading_chip(0)]
    hung = {"kubelet": False, "exporter": False}

    async def containers(timeout: float) -> Sequence[ContainerDevices]:
        return await hang(timeout) if hung["kubelet"] else listing

    async def exporter(timeout: float) -> Sequence[Chip]:
        if hung["exporter"]:
            await asyncio.sleep(3600)
        return chips

    metrics = ContainerMetrics(containers, exporter, period=0.2)
    await metrics.refresh()
    assert 'container_npu_utilization{container_name="c",id="0"' in scrape(metrics)

    hung["kubelet"] = hung["exporter"] = True
    task = asyncio.create_task(metrics.refresh())
    started = time.monotonic()
    await asyncio.sleep(0.05)
    text = scrape(metrics)  # mid-round: the last samples, at once
    assert time.monotonic() - started < 0.15
    assert 'container_npu_utilization{container_name="c",id="0"' in text
    await task
    assert time.monotonic() - started < 0.2 + 0.1, "a round ends at its deadline"
    # The kubelet's last listing stays; the exporter's readings are not served stale.
    assert metrics.samples == (info(0, "ns", "p", "c"),)

    hung["kubelet"] = hung["exporter"] = False
    listing = []
    await metrics.refresh()
    assert len(metrics.samples) == 0, "the pod is gone"


async def test_a_failing_source_is_logged_once_per_streak(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(timeout: float) -> Sequence[ContainerDevices]:
        raise OSError("kubelet.sock: connection refused")

    async def chips(timeout: float) -> Sequence[Chip]:
        return [reading_chip(0)]

    metrics = ContainerMetrics(broken, chips, period=1.0)
    for _ in range(3):
        await metrics.refresh()
    failures = [r for r in caplog.records if "source failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].__dict__["source"] == "kubelet PodResources"
    assert metrics.rounds == 3 and metrics.samples == ()


def test_the_families_are_described_with_npu_exporters_help() -> None:
    async def no_containers(timeout: float) -> Sequence[ContainerDevices]:
        return []

    async def no_chips(timeout: float) -> Sequence[Chip]:
        return []

    text = scrape(ContainerMetrics(no_containers, no_chips, period=1.0))
    assert "# HELP container_npu_utilization npu ai core utilization in container, unit is '%'" in text
    assert "# HELP container_npu_total_memory npu total memory in container, unit is 'MB'" in text
    assert "# HELP container_npu_used_memory the npu used memory in container, unit is 'MB'" in text
    assert "# HELP npu_container_info the container name and deviceID relationship" in text
    assert "# TYPE npu_container_info gauge" in text


def test_vnpu_fixture_sanity() -> None:
    # The exporter's chip carries the vNPU; the container map keys it by vdev id, not by the chip.
    chip = exporter_chip(0, 0, vnpus=[Vnpu(vdev_id=100, vfg_id=0, template="vir04", suffix="4c", aicore=4)])
    assert container_samples(
        [row("ns", "p", "c", "Ascend910-4c-100-0", resource="huawei.com/Ascend910-4c")], [chip]
    ) == [Sample(INFO, ("0", "Ascend910B3", "", "", "ns", "p", "c", "", "ns_p_c"), 1.0)]


def test_every_family_is_documented_beside_npu_exporters_name() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "wire-formats.md").read_text("utf-8")
    assert [name for name, _, _ in FAMILIES if f"`{name}`" not in doc] == []


async def test_each_round_tells_the_exporter_who_holds_each_chip_and_a_failure_costs_nothing_else(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The exporter's chip series carry npu-exporter's CardLabel from this mapping: chips held by a
    container (not one of its vNPUs), the round's listing, the last one when the kubelet fails; its
    vNPU series the vNPUs' holders, by vdev id."""
    listing = [
        row("ns", "p", "c", "Ascend910-3"),
        row("ns", "v", "c", "Ascend910-4c-100-5", resource="huawei.com/Ascend910-4c"),
    ]
    kubelet_up = [True]
    sent: list[dict[int, list[ContainerRef]]] = []
    sent_vnpus: list[dict[int, list[ContainerRef]]] = []
    exporter_up = [True]

    async def containers(timeout: float) -> Sequence[ContainerDevices]:
        if not kubelet_up[0]:
            raise OSError("kubelet gone")
        return listing

    async def chips(timeout: float) -> Sequence[Chip]:
        return [reading_chip(3)]

    async def publish(
        holders: Mapping[int, Sequence[ContainerRef]], vnpus: Mapping[int, Sequence[ContainerRef]], timeout: float
    ) -> None:
        if not exporter_up[0]:
            raise OSError("exporter gone")
        sent.append({phy: list(refs) for phy, refs in holders.items()})
        sent_vnpus.append({vdev: list(refs) for vdev, refs in vnpus.items()})

    metrics = ContainerMetrics(containers, chips, period=1.0, publish=publish)
    await metrics.refresh()
    assert sent == [{3: [ContainerRef("ns", "p", "c")]}]
    assert sent_vnpus == [{100: [ContainerRef("ns", "v", "c")]}]
    kubelet_up[0] = False
    await metrics.refresh()
    assert sent[-1] == {3: [ContainerRef("ns", "p", "c")]}  # the last listing, as the container families
    exporter_up[0] = False
    await metrics.refresh()
    assert metrics.rounds == 3 and len(sent) == 2
    assert any(r.__dict__.get("source") == "exporter containers" for r in caplog.records)
    assert "npu_container_info{" in scrape(metrics)


class _Exporter:
    """Takes what the plugin PUTs to the exporter's /v1/containers."""

    def __init__(self) -> None:
        self.mappings: list[ContainerMapping] = []

    async def put_containers(self, mapping: ContainerMapping) -> None:
        self.mappings.append(mapping)


async def test_holders_leave_out_the_vdev_ids_the_exporter_refuses() -> None:
    """npu-exporter serves vNPUs 100..1123 only, and the exporter answers 422 to any other: one id
    the kubelet names outside them must not cost the whole mapping (the chips' holders with it)."""
    exporter = _Exporter()
    ref = [ContainerRef("ns", "pod", "c")]
    vnpus = {99: ref, 100: ref, 1123: ref, 1124: ref, 65535: ref}
    await ExporterHolders(exporter).publish({3: ref}, vnpus, deadline_s=1.0)  # type: ignore[arg-type]
    (mapping,) = exporter.mappings
    assert [v.vdev_id for v in mapping.vnpus] == [100, 1123]
    assert [c.phy_id for c in mapping.chips] == [3]
    assert [(h.namespace, h.pod, h.container) for h in mapping.vnpus[0].containers] == [("ns", "pod", "c")]
