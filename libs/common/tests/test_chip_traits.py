"""The chip-family table (`ascend_common.chip_traits`): one table test per trait.

Each expected column is written out by family, from the reference, so that a changed row shows
here as the fact it changes, and a new family fails the completeness test until every trait of
its row is stated below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from ascend_common.chip_traits import (
    TRAITS,
    FamilyTraits,
    IdScheme,
    MetricGroup,
    Network,
    ResetScope,
    SuperPodFields,
    SwitchInfo,
    families_with,
    resource_type,
    traits,
)
from ascend_common.chips import ChipFamily, ResourceType

F = ChipFamily
M = MetricGroup
_310, _310B, _310P = F.ASCEND310, F.ASCEND310B, F.ASCEND310P
_910, _910B, _A3, _950 = F.ASCEND910, F.ASCEND910B, F.ASCEND910A3, F.ASCEND950

# trait -> family -> expected value
EXPECTED: Mapping[str, Mapping[ChipFamily, object]] = {
    "resource_type": {
        _310: ResourceType.ASCEND310, _310B: ResourceType.ASCEND310, _310P: ResourceType.ASCEND310P,
        _910: ResourceType.ASCEND910, _910B: ResourceType.ASCEND910, _A3: ResourceType.ASCEND910,
        _950: ResourceType.NPU,
    },
    "device_type": {
        _310: "Ascend310", _310B: "Ascend310B", _310P: "Ascend310P", _910: "Ascend910", _910B: "Ascend910B",
        _A3: "Ascend910A3", _950: "Ascend910A5",
    },
    "on_chip_memory": {_310: False, _310B: False, _310P: False, _910: True, _910B: True, _A3: True, _950: True},
    "reset_scope": {
        _310: ResetScope.RING, _310B: ResetScope.RING, _310P: ResetScope.RING, _910: ResetScope.RING,
        _910B: ResetScope.HCCS, _A3: ResetScope.BROTHER_CARDS, _950: ResetScope.RING,
    },
    "ring_size": {_310: 1, _310B: 1, _310P: 1, _910: 4, _910B: 8, _A3: 16, _950: 1},
    "id_scheme": {
        _310: IdScheme.PHY, _310B: IdScheme.PHY, _310P: IdScheme.PHY, _910: IdScheme.PHY, _910B: IdScheme.PHY,
        _A3: IdScheme.PHY, _950: IdScheme.LOGIC,
    },
    "super_pod": {
        _310: SuperPodFields.NONE, _310B: SuperPodFields.NONE, _310P: SuperPodFields.NONE,
        _910: SuperPodFields.NONE, _910B: SuperPodFields.NONE, _A3: SuperPodFields.POD, _950: SuperPodFields.RACK,
    },
    "server_type": {_310: "", _310B: "", _310P: "", _910: "", _910B: "", _A3: "A3", _950: "npu"},
    "server_label_prefix": {
        _310: "Ascend310", _310B: "Ascend310B", _310P: "Ascend310P", _910: "Ascend910", _910B: "Ascend910B",
        _A3: "Ascend910A3", _950: "npu",
    },
    "server_label_forced": {_310: False, _310B: False, _310P: False, _910: False, _910B: False, _A3: False, _950: True},
    "accelerator_label": {_310: True, _310B: False, _310P: True, _910: True, _910B: True, _A3: True, _950: True},
    "infer_card_boards": {
        _310: frozenset(), _310B: frozenset(), _310P: frozenset(), _910: frozenset(),
        _910B: frozenset({0x28, 0x29}), _A3: frozenset(), _950: frozenset(),
    },
    "vnpu_templates": {
        _310: (), _310B: (),
        _310P: ("vir01", "vir02", "vir04", "vir02_1c", "vir04_3c", "vir04_3c_ndvpp", "vir04_4c_dvpp"),
        _910: ("vir01", "vir02", "vir04", "vir08", "vir16"),
        _910B: ("vir03_1c_8g", "vir05_1c_8g", "vir05_1c_16g", "vir06_1c_16g", "vir10_3c_16g", "vir10_3c_16g_nm",
                "vir10_3c_32g", "vir10_4c_16g_m", "vir12_3c_32g"),
        _A3: ("vir12_3c_32g", "vir06_1c_16g", "vir05_1c_16g", "vir10_3c_32g"),
        _950: (),
    },
    "share_dev": {_310: False, _310B: True, _310P: True, _910: False, _910B: False, _A3: False, _950: False},
    "allow_link": {_310: False, _310B: True, _310P: False, _910: False, _910B: False, _A3: False, _950: False},
    "manager_docker_node": {
        _310: False, _310B: True, _310P: False, _910: False, _910B: False, _A3: False, _950: False,
    },
    "device_ip": {_310: True, _310B: True, _310P: True, _910: True, _910B: True, _A3: True, _950: False},
    "rank_levels": {_310: False, _310B: False, _310P: False, _910: False, _910B: False, _A3: False, _950: True},
    "hccl_topo_file": {_310: False, _310B: False, _310P: False, _910: False, _910B: False, _A3: False, _950: True},
    "shm_die": {_310: "VDIE", _310B: "VDIE", _310P: "VDIE", _910: "VDIE", _910B: "VDIE", _A3: "VDIE", _950: "DDIE"},
    "urma": {_310: False, _310B: False, _310P: False, _910: False, _910B: False, _A3: False, _950: True},
    "network": {
        _310: Network.NONE, _310B: Network.NONE, _310P: Network.NONE, _910: Network.ROCE, _910B: Network.ROCE,
        _A3: Network.ROCE, _950: Network.UB,
    },
    "switch_info": {
        _310: SwitchInfo.NONE, _310B: SwitchInfo.NONE, _310P: SwitchInfo.NONE, _910: SwitchInfo.NONE,
        _910B: SwitchInfo.NONE, _A3: SwitchInfo.WATCHED, _950: SwitchInfo.UNWATCHED,
    },
    "die_policy": {_310: False, _310B: False, _310P: False, _910: False, _910B: False, _A3: True, _950: False},
    "library_v2": {_310: False, _310B: False, _310P: False, _910: False, _910B: False, _A3: False, _950: True},
    "metrics": {
        _310: frozenset({M.DDR, M.VECTOR_UTIL}),
        _310B: frozenset({M.DDR, M.VECTOR_UTIL}),
        _310P: frozenset({M.DDR, M.VECTOR_UTIL, M.PRODUCT_TYPE, M.VNPU}),
        _910: frozenset({M.HBM, M.DDR}),
        _910B: frozenset({M.HBM, M.OVERALL_UTIL, M.CUBE_UTIL, M.VECTOR_UTIL, M.PCIE, M.HCCS}),
        _A3: frozenset({M.HBM, M.OVERALL_UTIL, M.CUBE_UTIL, M.VECTOR_UTIL, M.HCCS, M.SIO}),
        _950: frozenset({M.HBM, M.OVERALL_UTIL, M.VECTOR_UTIL, M.PCIE, M.SIO, M.UB}),
    },
    "pcie_main_boards": {
        _310: None, _310B: None, _310P: None, _910: None, _910B: None, _A3: None,
        _950: frozenset({0x68, 0x6B, 0x6C, 0x44}),
    },
}  # fmt: skip


def test_every_family_has_a_row_and_every_trait_is_stated_here() -> None:
    assert set(TRAITS) == set(ChipFamily)
    assert set(EXPECTED) == set(FamilyTraits.__dataclass_fields__)
    for trait, by_family in EXPECTED.items():
        assert set(by_family) == set(ChipFamily), trait


@pytest.mark.parametrize(("trait", "family"), [(trait, family) for trait in EXPECTED for family in ChipFamily], ids=str)
def test_trait(trait: str, family: ChipFamily) -> None:
    assert getattr(traits(family), trait) == EXPECTED[trait][family]


@pytest.mark.parametrize("family", list(ChipFamily))
def test_resource_type_is_the_rows(family: ChipFamily) -> None:
    assert resource_type(family) is EXPECTED["resource_type"][family]


@pytest.mark.parametrize(
    ("test", "families"),
    [
        (lambda row: row.share_dev, {_310P, _310B}),
        (lambda row: MetricGroup.HBM in row.metrics, {_910, _910B, _A3, _950}),
        (lambda row: row.network is Network.ROCE, {_910, _910B, _A3}),
        (lambda row: row.super_pod is not SuperPodFields.NONE, {_A3, _950}),
        (lambda row: False, set()),
    ],
)
def test_families_with(test: Callable[[FamilyTraits], bool], families: set[ChipFamily]) -> None:
    assert families_with(test) == families


def test_the_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        TRAITS[ChipFamily.ASCEND310] = TRAITS[ChipFamily.ASCEND910]  # type: ignore[index]
    with pytest.raises(AttributeError):
        TRAITS[ChipFamily.ASCEND310].ring_size = 2  # type: ignore[misc]
