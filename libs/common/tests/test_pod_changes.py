"""pod_changes: a list read twice (the kubelet's /pods, polled) as the watch's ADDED/MODIFIED/DELETED."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest
from ascend_common.pods import PodChange, SlimPod, pod_changes


def pod(uid: str, rv: str = "1", **kw: object) -> SlimPod:
    base = SlimPod(
        namespace="ns", name=f"p-{uid}", uid=uid, phase="Running", node_name="node-a",
        annotations=MappingProxyType({}), labels=MappingProxyType({}), requests=MappingProxyType({}),
        deleting=False, created=1.0, resource_version=rv,
    )  # fmt: skip
    return replace(base, **kw)  # type: ignore[arg-type]


def by_uid(*pods: SlimPod) -> dict[str, SlimPod]:
    return {p.uid: p for p in pods}


A, B, C = pod("a"), pod("b"), pod("c")
CASES: list[tuple[str, dict[str, SlimPod], dict[str, SlimPod], list[tuple[PodChange, str]]]] = [
    ("nothing to nothing", {}, {}, []),
    ("first list: all added, in list order", {}, by_uid(B, A), [("ADDED", "b"), ("ADDED", "a")]),
    ("unchanged", by_uid(A, B), by_uid(A, B), []),
    ("an equal copy is no change", by_uid(A), by_uid(pod("a")), []),
    ("one gone", by_uid(A, B), by_uid(A), [("DELETED", "b")]),
    ("all gone", by_uid(A, B), {}, [("DELETED", "a"), ("DELETED", "b")]),
    ("new resourceVersion", by_uid(A), by_uid(pod("a", rv="2")), [("MODIFIED", "a")]),
    ("phase changed, same rv", by_uid(A), by_uid(pod("a", phase="Succeeded")), [("MODIFIED", "a")]),
    (
        "annotation added with no rv (a static pod)",
        by_uid(pod("a", rv="")),
        by_uid(pod("a", rv="", annotations=MappingProxyType({"k": "v"}))),
        [("MODIFIED", "a")],
    ),
    ("deleting set", by_uid(A), by_uid(pod("a", deleting=True)), [("MODIFIED", "a")]),
    (
        "same name, new uid: the old one goes, the new one comes",
        by_uid(A),
        by_uid(pod("a2", name="p-a")),
        [("DELETED", "a"), ("ADDED", "a2")],
    ),
    (
        "mixed: deletions first, then additions and modifications",
        by_uid(A, B, C),
        by_uid(pod("c", rv="9"), pod("d")),
        [("DELETED", "a"), ("DELETED", "b"), ("MODIFIED", "c"), ("ADDED", "d")],
    ),
]


@pytest.mark.parametrize(("old", "new", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pod_changes(old: dict[str, SlimPod], new: dict[str, SlimPod], want: list[tuple[PodChange, str]]) -> None:
    assert [(kind, p.uid) for kind, p in pod_changes(old, new)] == want


def test_a_deleted_pod_is_reported_with_its_last_state() -> None:
    last = pod("a", phase="Running", annotations=MappingProxyType({"kltDev": "x"}))
    ((kind, gone),) = pod_changes(by_uid(last), {})
    assert kind == "DELETED" and gone is last


def test_modified_carries_the_new_state() -> None:
    ((_, now),) = pod_changes(by_uid(A), by_uid(pod("a", rv="2", phase="Failed")))
    assert now.phase == "Failed" and now.resource_version == "2"


def test_applying_the_changes_to_the_old_list_gives_the_new_one() -> None:
    old, new = by_uid(A, B, pod("c", rv="1")), by_uid(pod("c", rv="2"), pod("d"), B)
    state = dict(old)
    for kind, p in pod_changes(old, new):
        if kind == "DELETED":
            del state[p.uid]
        else:
            state[p.uid] = p
    assert state == new
