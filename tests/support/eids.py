"""950 URMA EIDs for the rank-level tests: issue 25's 1D pod devices and the mesh EID they are made of."""

from __future__ import annotations

from ascend_device_plugin.model.eid import UrmaEids

PG_PORT = 0x3F  # the port field of a device's PG EID


def mesh_eid(die: int, port: int, fe: int) -> str:
    """A mesh EID: byte 5 = die << 6 | port, byte 6 = fe."""
    return f"0000000000{die << 6 | port:02x}{fe:02x}" + "0" * 18


# Issue 25's 1D pod devices: {fe1, die0: ports 1,2, PG}, {fe2, die0: 5, PG}, {fe2, die1: 7, PG}
# (the Go goldens `pod_1d_phy1` / `pod_1d_phy5` are built from them).
POD_1D_DEVICES = (
    UrmaEids(0, (mesh_eid(0, 1, 1), mesh_eid(0, 2, 1), mesh_eid(0, PG_PORT, 1))),
    UrmaEids(1, (mesh_eid(0, 5, 2), mesh_eid(0, PG_PORT, 2))),
    UrmaEids(2, (mesh_eid(1, 7, 2), mesh_eid(1, PG_PORT, 2))),
)
