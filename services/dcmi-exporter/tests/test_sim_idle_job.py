"""The simulator's idle job (what hung-job detection looks for) and its HangProbe."""

from __future__ import annotations

import pytest
from ascend_common.clock import ManualClock
from dcmi_exporter.backends.sim import SimBackend
from dcmi_exporter.backends.sim.hang_probe import SimHangProbe
from dcmi_exporter.node.snapshot import chip_ok
from dcmi_exporter.tasks.hang_rule import HangConfig, HangState, Sample, step


def backend() -> tuple[SimBackend, ManualClock]:
    clock = ManualClock()
    return SimBackend("910b-8", clock=clock), clock


def test_idle_job_lists_its_pids_reads_ai_core_0_and_keeps_counters_still() -> None:
    sim, clock = backend()
    addr = sim.discover()[1]
    sim.start_idle_job(1, [4242, 77])
    dyn = sim.read_dynamic(addr)
    assert dyn.processes.value is not None and sorted(p.pid for p in dyn.processes.value) == [77, 4242]
    assert dyn.utilization.value is not None and dyn.utilization.value.aicore_pct == 0
    before = (sim.traffic(1), sim.cpu_seconds([4242, 77]), dyn.utilization.value.hbm_pct)
    clock.advance(600)
    dyn = sim.read_dynamic(addr)
    assert dyn.utilization.value is not None
    assert (sim.traffic(1), sim.cpu_seconds([4242, 77]), dyn.utilization.value.hbm_pct) == before
    # Everything else moves: another chip's counters, another pid's CPU.
    other_traffic, other_cpu = sim.traffic(0), sim.cpu_seconds([5])
    clock.advance(1)
    assert sim.traffic(0)[0] > other_traffic[0] and sim.traffic(0)[1] > other_traffic[1]
    assert sim.cpu_seconds([5]) > other_cpu


def test_ending_the_idle_job_removes_its_processes_and_moves_again() -> None:
    sim, clock = backend()
    addr = sim.discover()[1]
    sim.start_idle_job(1, [42])
    frozen = sim.traffic(1)
    clock.advance(60)
    sim.end_idle_job(1)
    dyn = sim.read_dynamic(addr)
    assert dyn.processes.value == []
    assert sim.traffic(1)[0] > frozen[0]
    sim.set_processes(1, [(42, 1 << 30)])  # a busy job
    dyn = sim.read_dynamic(addr)
    assert dyn.utilization.value is not None and dyn.utilization.value.aicore_pct is not None
    assert dyn.utilization.value.aicore_pct > HangConfig().aicore_utilization


def test_a_new_process_list_ends_the_idle_job() -> None:
    sim, _ = backend()
    sim.start_idle_job(1, [42])
    sim.set_processes(1, [(43, 0)])
    dyn = sim.read_dynamic(sim.discover()[1])
    assert dyn.utilization.value is not None and dyn.utilization.value.aicore_pct != 0


@pytest.mark.parametrize(("pids", "error"), [([], ValueError), ([0], ValueError), ([5, 5], ValueError)])
def test_idle_job_refuses_bad_pids(pids: list[int], error: type[Exception]) -> None:
    sim, _ = backend()
    with pytest.raises(error):
        sim.start_idle_job(1, pids)
    with pytest.raises(KeyError):
        sim.start_idle_job(99, [42])


async def test_the_sim_probe_meets_the_rule_only_while_the_job_is_idle() -> None:
    sim, clock = backend()
    probe = SimHangProbe(sim)
    addr = sim.discover()[1]
    static = sim.read_static(addr)

    async def sample() -> Sample:
        dyn = sim.read_dynamic(addr)
        chip = chip_ok(addr, static, dyn, clock.now())
        assert dyn.utilization.value is not None and dyn.processes.value is not None
        util = dyn.utilization.value
        assert util.aicore_pct is not None and util.hbm_pct is not None
        pids = tuple(sorted(p.pid for p in dyn.processes.value))
        cpu = await probe.cpu_times(pids)
        return Sample(pids, util.aicore_pct, util.hbm_pct, await probe.traffic(chip), cpu.seconds, cpu.starts)

    cfg = HangConfig()
    sim.set_processes(1, [(42, 1 << 30)])
    state = HangState()
    for _ in range(8):
        clock.advance(60)
        state, transition = step(state, await sample(), cfg)
        assert transition is None and state.count == 0
    sim.start_idle_job(1, [42])
    transitions = []
    for _ in range(6):
        clock.advance(60)
        state, transition = step(state, await sample(), cfg)
        transitions.append(transition)
    assert transitions == [None] * 5 + ["occur"]
