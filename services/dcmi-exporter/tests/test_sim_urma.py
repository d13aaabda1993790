"""The simulator's URMA EIDs (issue 25 part A): the 950 pod and server profiles list the issue's
"Must show" devices, so that the rank levels built from them can be checked end to end.

The EID fields are decoded here with the issue's rules (the reference's eid.go), independently of
the plugin's decoder: this file checks the sim's data, not the decoder.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import replace

import pytest
from ascend_common.chips import ChipAddress
from ascend_common.schemas.exporter import UrmaDevice
from dcmi_exporter.backends.sim import PROFILES, SimBackend

POD_PHY_1 = [
    ["00000000000101000000000000000000", "00000000000201000000000000000000", "00000000003f01000000000000000000"],
    ["00000000000502000000000000000000", "00000000003f02000000000000000000"],
    ["00000000004702000000000000000000", "00000000007f02000000000000000000"],
]


def die(eid: str) -> int:
    return (int(eid[10], 16) & 0xC) >> 2


def port(eid: str) -> int:
    return int(eid[10:12], 16) & 0x3F


def fe(eid: str) -> int:
    return int(eid[12:14], 16) & 0x7F


def is_uboe(eid: str) -> bool:
    return int(eid[14], 16) & 0xC == 0xC


def uboe_ip(eid: str) -> str:
    return ".".join(str(int(eid[i : i + 2], 16)) for i in (12, 24, 26, 28))


@pytest.fixture
def backend_of() -> Iterator[dict[str, SimBackend]]:
    made: dict[str, SimBackend] = {}
    yield made
    for backend in made.values():
        backend.close()


def urma_by_phy(made: dict[str, SimBackend], profile: str) -> dict[int, list[UrmaDevice] | None]:
    backend = made.setdefault(profile, SimBackend(profile))
    chips: list[ChipAddress] = backend.discover()
    return {c.phy_id: backend.read_static(c).urma for c in chips}


def test_issue_examples_decode_as_the_issue_says() -> None:
    """The decoder of this file against the issue's own EID examples, so the checks below mean something."""
    assert (die("00000000004702000000000000000000"), port("00000000004702000000000000000000")) == (1, 7)
    assert fe("00000000004702000000000000000000") == 2
    assert port("00000000007f02000000000000000000") == 0x3F
    assert is_uboe("0000000000000ac00000000014000105") and uboe_ip("0000000000000ac00000000014000105") == "10.20.0.1"
    assert not is_uboe("00000000004702000000000000000000")


def test_pod_phy_1_lists_the_must_show_devices_verbatim(backend_of: dict[str, SimBackend]) -> None:
    urma = urma_by_phy(backend_of, "a5-superpod-8")[1]
    assert urma == [UrmaDevice(index=i, eids=eids) for i, eids in enumerate(POD_PHY_1)]


@pytest.mark.parametrize("profile", ["a5-superpod-8", "a5-8"])
def test_every_chip_has_the_pod_devices_fields_and_distinct_eids(
    backend_of: dict[str, SimBackend], profile: str
) -> None:
    by_phy = urma_by_phy(backend_of, profile)
    assert sorted(by_phy) == list(range(8))
    seen: set[str] = set()
    for phy, urma in by_phy.items():
        assert urma is not None, phy
        shape = [[(die(e), port(e), fe(e)) for e in d.eids] for d in urma[:3]]
        assert shape == [[(0, 1, 1), (0, 2, 1), (0, 0x3F, 1)], [(0, 5, 2), (0, 0x3F, 2)], [(1, 7, 2), (1, 0x3F, 2)]]
        assert not any(is_uboe(e) for d in urma[:3] for e in d.eids)
        eids = [e for d in urma for e in d.eids]
        assert seen.isdisjoint(eids), phy
        seen.update(eids)


def test_server_chips_have_a_uboe_device_with_their_own_ipv4(backend_of: dict[str, SimBackend]) -> None:
    by_phy = urma_by_phy(backend_of, "a5-8")
    for phy, urma in by_phy.items():
        assert urma is not None and len(urma) == 4
        (uboe,) = urma[3].eids
        assert is_uboe(uboe) and uboe_ip(uboe) == f"10.20.{phy}.1"
    assert by_phy[0] is not None and by_phy[0][3].eids == ["0000000000000ac00000000014000105"]


def test_pod_chips_have_no_uboe_device(backend_of: dict[str, SimBackend]) -> None:
    for urma in urma_by_phy(backend_of, "a5-superpod-8").values():
        assert urma is not None and len(urma) == 3


@pytest.mark.parametrize("profile", sorted(set(PROFILES) - {"a5-superpod-8", "a5-8"}))
def test_other_profiles_list_no_urma_devices(backend_of: dict[str, SimBackend], profile: str) -> None:
    assert set(urma_by_phy(backend_of, profile).values()) == {None}


def test_only_a_950_profile_may_have_urma_devices() -> None:
    with pytest.raises(ValueError, match="URMA"):
        replace(PROFILES["910b-8"], urma="server")


def test_server_uboe_eid_ip_is_a_valid_ipv4() -> None:
    devices = PROFILES["a5-8"].urma_devices(7)
    assert devices is not None
    assert ipaddress.IPv4Address(uboe_ip(devices[3][0])) == ipaddress.IPv4Address("10.20.7.1")


def test_the_simulated_host_has_the_issues_l3_nics() -> None:
    backend = SimBackend("a5-8")
    try:
        nics = backend.host_addresses()
        assert (nics["ens1f0"], nics["ens1f2"]) == (["fe80::1"], ["10.0.0.7"])
        nics["ens1f2"].append("10.9.9.9")  # a copy: the caller cannot change the simulated host
        assert backend.host_addresses()["ens1f2"] == ["10.0.0.7"]
    finally:
        backend.close()
