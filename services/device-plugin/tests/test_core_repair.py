"""Annotation repair: the pure rules (allocation/repair_rules.py) by table, and the pod-event shell
(allocation/repair.py) over a recording patcher.

Go's TestAddPodAnnotation1..3 (pkg/device/ascendcommon_test.go) assert only that AddPodAnnotation
returns no error with a mocked update; their cases (a physical 310P chip, a 910 chip, a static vNPU)
are kept here as rows with what ours writes back for each. TestUpdatePodAnnotation
(pkg/server/manager_test.go) checks the 5 s loop runs; ours has no loop, the event is the trigger.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace

import pytest
from ascend_device_plugin.allocation.repair import AnnotationRepair
from ascend_device_plugin.allocation.repair_rules import REPAIRED_KEYS, adoptable, kept, repair_patch
from ascend_device_plugin.model.chip_pod import PodView

REAL, KLT = "huawei.com/AscendReal", "huawei.com/kltDev"
CONFIG = "ascend.kubectl.kubernetes.io/ascend-910-configuration"
WRITTEN = {KLT: "Ascend910-3", REAL: "Ascend910-3", CONFIG: '{"pod_name":"web"}'}


def pod(annotations: dict[str, str], *, phase: str = "Running", deleting: bool = False, uid: str = "u1") -> PodView:
    return PodView(namespace="ml", name="web", uid=uid, phase=phase, annotations=annotations, requests={},
                   deleting=deleting)  # fmt: skip


def test_repaired_keys_are_the_ones_add_pod_annotation_corrects() -> None:
    assert REPAIRED_KEYS == (KLT, REAL, CONFIG, "ascend.kubectl.kubernetes.io/ascend-npu-configuration")
    # Volcano's mark and the soft-share vNPU id are not the report's to keep.
    assert kept({**WRITTEN, "predicate-time": "1", "huawei.com/scheduler.softShareDev.vnpuId": "3"}) == WRITTEN


@pytest.mark.parametrize(
    ("case", "written", "current", "phase", "deleting", "patch"),
    [
        ("nothing changed", WRITTEN, WRITTEN, "Running", False, {}),
        ("AscendReal edited", WRITTEN, {**WRITTEN, REAL: "Ascend910-7"}, "Running", False, {REAL: "Ascend910-3"}),
        ("AscendReal lost (the reference's only case)", WRITTEN, {KLT: "Ascend910-3", CONFIG: WRITTEN[CONFIG]},
         "Running", False, {REAL: "Ascend910-3"}),
        ("all three lost", WRITTEN, {"other": "x"}, "Pending", False, WRITTEN),
        ("configuration edited", WRITTEN, {**WRITTEN, CONFIG: "{}"}, "Running", False, {CONFIG: WRITTEN[CONFIG]}),
        ("an annotation we never wrote is not ours", {KLT: "Ascend910-3"}, {KLT: "Ascend910-3", REAL: "junk"},
         "Running", False, {}),
        ("physical device 310P", {KLT: "Ascend310P-0", REAL: "Ascend310P-0"}, {KLT: "Ascend310P-0"}, "Running",
         False, {REAL: "Ascend310P-0"}),
        ("virtual device (static vNPU: kltDev only)", {KLT: "Ascend310P-2c-100-0"}, {}, "Running", False,
         {KLT: "Ascend310P-2c-100-0"}),
        ("a pod being deleted is left alone", WRITTEN, {}, "Running", True, {}),
        ("a finished pod is left alone", WRITTEN, {}, "Succeeded", False, {}),
        ("a failed pod is left alone", WRITTEN, {}, "Failed", False, {}),
    ],
)  # fmt: skip
def test_add_pod_annotation(
    case: str, written: dict[str, str], current: dict[str, str], phase: str, deleting: bool, patch: dict[str, str]
) -> None:
    assert repair_patch(written, pod(current, phase=phase, deleting=deleting)) == patch, case


@pytest.mark.parametrize(
    ("case", "view", "adopted"),
    [
        ("an allocated running pod", pod(WRITTEN), WRITTEN),
        ("an allocated pending pod that lost AscendReal", pod({KLT: "Ascend910-3"}, phase="Pending"),
         {KLT: "Ascend910-3"}),
        ("no kltDev: never allocated by a plugin", pod({REAL: "Ascend910-3"}), None),
        ("being deleted", pod(WRITTEN, deleting=True), None),
        ("finished", pod(WRITTEN, phase="Succeeded"), None),
    ],
)  # fmt: skip
def test_adoptable(case: str, view: PodView, adopted: dict[str, str] | None) -> None:
    assert adoptable(view) == adopted, case


@dataclass
class RecordingPatcher:
    patches: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    fail: Exception | None = None
    gate: asyncio.Event | None = None  # held until set, to keep a repair in flight

    async def patch_pod(
        self, namespace: str, name: str, annotations: dict[str, str], *, retries: int = 3, base_delay: float = 0.2
    ) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.patches.append((namespace, name, dict(annotations)))
        if self.fail is not None:
            raise self.fail


async def settle(repair: AnnotationRepair) -> None:
    """Let the repair tasks started so far finish (they only await the recording patcher)."""
    await asyncio.gather(*list(repair._repairs.values()))


async def test_an_edit_is_written_back_on_the_pod_event() -> None:
    patcher = RecordingPatcher()
    repair = AnnotationRepair(patcher)
    repair.wrote(pod({}), {**WRITTEN, "predicate-time": "18446744073709551615"})
    repair.pod_changed("MODIFIED", pod(WRITTEN))  # our own report coming back: nothing to do
    repair.pod_changed("MODIFIED", pod({**WRITTEN, REAL: "Ascend910-7"}))
    await settle(repair)
    assert patcher.patches == [("ml", "web", {REAL: "Ascend910-3"})]


async def test_one_repair_in_flight_per_pod() -> None:
    patcher = RecordingPatcher(gate=asyncio.Event())
    repair = AnnotationRepair(patcher)
    repair.wrote(pod({}), WRITTEN)
    repair.pod_changed("MODIFIED", pod({}))
    repair.pod_changed("MODIFIED", pod({KLT: "x"}))  # a second event while the first repair is in flight
    assert patcher.gate is not None
    patcher.gate.set()
    await settle(repair)
    assert patcher.patches == [("ml", "web", WRITTEN)]


async def test_deleting_never_allocated_and_gone_pods_are_left_alone() -> None:
    patcher = RecordingPatcher()
    repair = AnnotationRepair(patcher)
    repair.wrote(pod({}), WRITTEN)
    repair.pod_changed("MODIFIED", pod({}, deleting=True))
    repair.pod_changed("MODIFIED", pod({REAL: "Ascend910-1"}, uid="stranger"))  # no kltDev: not ours
    repair.pod_changed("MODIFIED", pod({REAL: "Ascend910-2"}, uid="stranger"))
    repair.pod_changed("DELETED", pod({}))
    repair.pod_changed("ADDED", replace(pod({}), uid="u1"))  # a new pod object under the old uid: unknown
    await settle(repair)
    assert patcher.patches == []
    assert repair.written == {}


async def test_a_restarted_plugin_adopts_then_repairs() -> None:
    patcher = RecordingPatcher()
    repair = AnnotationRepair(patcher)
    repair.pod_changed("ADDED", pod(WRITTEN))  # the first list after a restart
    repair.pod_changed("MODIFIED", pod({**WRITTEN, KLT: "Ascend910-0"}))
    await settle(repair)
    assert patcher.patches == [("ml", "web", {KLT: "Ascend910-3"})]


async def test_a_failed_repair_is_logged_naming_the_pod(caplog: pytest.LogCaptureFixture) -> None:
    patcher = RecordingPatcher(fail=RuntimeError("409 Conflict, retries exhausted"))
    repair = AnnotationRepair(patcher)
    repair.wrote(pod({}), WRITTEN)
    with caplog.at_level(logging.WARNING, logger="ascend_device_plugin.allocation.repair"):
        repair.pod_changed("MODIFIED", pod({**WRITTEN, REAL: "Ascend910-7"}))
        await settle(repair)
    [failed] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert failed.getMessage() == "could not repair the pod's annotations"
    assert failed.__dict__["pod"] == "ml/web" and "409" in failed.__dict__["error"]
    [edited] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert edited.__dict__["found"] == {REAL: "Ascend910-7"}
    # The next event tries again.
    patcher.fail = None
    repair.pod_changed("MODIFIED", pod({**WRITTEN, REAL: "Ascend910-7"}))
    await settle(repair)
    assert patcher.patches[-1] == ("ml", "web", {REAL: "Ascend910-3"})
