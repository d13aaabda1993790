"""Ports of the reference's Go tests of 310P mixed insert (`-use310PMixedInsert`):
pkg/common/device_test.go TestCheckCardUsageMode, pkg/common/proto_test.go TestGet310PProductType,
pkg/device/ascendcommon_test.go TestAssemble310PMixedPhyDevices; plus the start checks of main.go
(`checkUse310PMixedInsertWithVolcano`, `checkUse310PMixedInsertWithShareDevCount`, untested there).

Test names are the Go test's, then the case. The resource manager is what the kubelet's lists come
from, so the naming is checked through it too.
"""

from __future__ import annotations

import pytest
from ascend_common.adapters.settings import load_settings
from ascend_common.chips import ChipFamily, ResourceType
from ascend_common.faults import default_fault_code_table
from ascend_common.naming import MIXED_310P_RESOURCES, mixed_device_id, parse_device_id
from ascend_device_plugin.inventory.views import ViewBoard
from ascend_device_plugin.metrics import PluginMetrics
from ascend_device_plugin.model.chip_pod import ChipInfo
from ascend_device_plugin.resources.manager import ResourceManager
from ascend_device_plugin.resources.mixed import card_usage_refusal, check_flags, mixed_devices
from ascend_device_plugin.settings import PluginSettings

from tests.support.chips import exporter_chip

V_PRO, V, I_PRO = "Atlas 300V Pro", "Atlas 300V", "Atlas 300I Pro"


def settings(*argv: str) -> PluginSettings:
    return load_settings(PluginSettings, list(argv), prog="ascend-device-plugin")


def test_get_310p_product_type() -> None:
    # Go: only "not nil"; the map itself, byte for byte as proto.go `Get310PProductType` has it.
    assert MIXED_310P_RESOURCES == {V_PRO: "Ascend310P-VPro", V: "Ascend310P-V", I_PRO: "Ascend310P-IPro"}


@pytest.mark.parametrize(
    ("case", "mixed", "products", "refused"),
    [
        ("use 310P Mixed Insert and device is correct", True, [V_PRO, V], False),
        ("use 310P Mixed Insert and device is incorrect", True, ["11", "222"], True),
        ("not use 310P Mixed Insert and device is correct", False, ["111"], False),
        ("do not get product type", True, [], True),
        # Ours: a chip whose product could not be read is skipped, as the reference skips its card.
        ("an unread product among known ones", True, [None, I_PRO], False),
        ("every product unread", True, [None, None], True),
        ("one card of another product", True, [V, "Atlas 300I Duo"], True),
    ],
)
def test_check_card_usage_mode(case: str, mixed: bool, products: list[str | None], refused: bool) -> None:
    reason = card_usage_refusal(mixed, products)
    assert (reason is not None) is refused, case
    if reason is not None:
        assert "Atlas 300V Pro, Atlas 300V, Atlas 300I Pro" in reason


def chip(phy: int, product: str | None, healthy: bool = True) -> ChipInfo:
    return ChipInfo(
        logic_id=phy, phy_id=phy, card_id=phy, name=f"Ascend310P-{phy}", rtype=ResourceType.ASCEND310P,
        family=ChipFamily.ASCEND310P, aicore=8, healthy=healthy, numa_node=0, product_type=product,
    )  # fmt: skip


def test_assemble_310p_mixed_phy_devices() -> None:
    # Go: a chip of an "Atlas 300V Pro" card is DevType Ascend310P-VPro, named Ascend310P-VPro-<phy>,
    # healthy. Ours, for a node of the three products and two chips that cannot be named.
    mixed = mixed_devices([chip(5, V_PRO), chip(1, V), chip(3, I_PRO, healthy=False), chip(0, V_PRO),
                           chip(2, None), chip(4, "Atlas 300I Duo")])  # fmt: skip
    assert {r: [(d.id, d.healthy) for d in e] for r, e in mixed.by_resource.items()} == {
        "Ascend310P-VPro": [("Ascend310P-VPro-0", True), ("Ascend310P-VPro-5", True)],
        "Ascend310P-V": [("Ascend310P-V-1", True)],
        "Ascend310P-IPro": [("Ascend310P-IPro-3", False)],
    }
    assert mixed.skipped == ["Ascend310P-2", "Ascend310P-4"]


@pytest.mark.parametrize(
    ("device_id", "phy", "product"),
    [("Ascend310P-V-3", 3, "Ascend310P-V"), ("Ascend310P-VPro-12", 12, "Ascend310P-VPro"),
     ("Ascend310P-IPro-0", 0, "Ascend310P-IPro")],
)  # fmt: skip
def test_get_device_id_of_a_mixed_device(device_id: str, phy: int, product: str) -> None:
    # Go (common.GetDeviceID): the phy id is the id's last field; the chip keeps its own name.
    parsed = parse_device_id(device_id)
    assert (parsed.phy_id, parsed.product, parsed.chip) == (phy, product, f"Ascend310P-{phy}")
    assert mixed_device_id(product, phy) == device_id


@pytest.mark.parametrize("bad", ["Ascend310P-X-3", "Ascend310P-V-", "Ascend310P-V-3-1", "Ascend910-V-3"])
def test_get_device_id_of_a_mixed_device_refuses_others(bad: str) -> None:
    with pytest.raises(ValueError, match="not an Ascend device id"):
        parse_device_id(bad)


@pytest.mark.parametrize(
    ("case", "volcano", "share", "preset", "refused"),
    [
        ("checkUse310PMixedInsertWithVolcano", True, 1, True, "--volcano-type must be false"),
        ("checkUse310PMixedInsertWithShareDevCount", False, 2, True, "--share-dev-count must be 1"),
        # checkPresetAndVolcanoRelation with the two above: dynamic vNPUs cannot go with mixed insert.
        ("dynamic vNPUs", False, 1, False, "--preset-virtual-device must be true"),
        ("every check passes", False, 1, True, None),
    ],
)
def test_check_param_mixed_insert(case: str, volcano: bool, share: int, preset: bool, refused: str | None) -> None:
    reason = check_flags(True, volcano_type=volcano, share_count=share, preset_virtual_device=preset)
    if refused is None:
        assert reason is None, case
    else:
        assert reason is not None and refused in reason, case
    assert check_flags(False, volcano_type=volcano, share_count=share, preset_virtual_device=preset) is None
    args = ["--use-310p-mixed-insert", *(["--volcano-type"] if volcano else []), "--share-dev-count", str(share),
            "--preset-virtual-device", str(preset).lower()]  # fmt: skip
    if refused is None:
        assert settings(*args).use_310p_mixed_insert
    else:
        with pytest.raises(ValueError, match=refused):
            settings(*args)


def test_set_use_ascend_docker_mixed_insert_mounts_devices() -> None:
    # main.go setUseAscendDocker: "mixed insert mode do not use npu docker".
    assert not settings("--use-310p-mixed-insert").runtime_mounts
    assert settings().runtime_mounts


def manager(products: dict[int, str | None]) -> tuple[ResourceManager, ViewBoard]:
    board = ViewBoard()
    m = ResourceManager(board, default_fault_code_table(), PluginMetrics(), mixed_310p=True)
    m.set_chips(
        {p: exporter_chip(p, p, name="310P3", board=0x64, aicore=8, product=product or "") for p, product in
         products.items()}
    )  # fmt: skip
    return m, board


def test_get_npus_mixed_insert_publishes_one_resource_per_product() -> None:
    # ascend310p.go GetNPUs with Use310PMixedInsert: no Ascend310P resource, no vNPU, one per product.
    m, board = manager({0: V_PRO, 1: V, 2: I_PRO, 3: V_PRO})
    assert board.resources() == ["Ascend310P-IPro", "Ascend310P-V", "Ascend310P-VPro"]
    view = board.get("Ascend310P-VPro")
    assert view is not None and [d.id for d in view.devices] == ["Ascend310P-VPro-0", "Ascend310P-VPro-3"]
    assert m.start_refusal() is None


def test_get_npus_mixed_insert_refuses_another_product() -> None:
    m, board = manager({0: V_PRO, 1: "Atlas 800T A2"})
    reason = m.start_refusal()
    assert reason is not None and "Atlas 800T A2" in reason
    assert board.resources() == ["Ascend310P-VPro"], "the other product's chip is never advertised"
