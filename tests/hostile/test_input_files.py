"""Hostile input files and ConfigMap values (issue 32 items 3 and 7): a structured input nested
50,000 deep, over 1 MiB or past a threshold's bound is refused like bad JSON; the service stays
up without that feature, logs it once and names it in /readyz `bad_inputs`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
from ascend_common.jsonin import InputError
from ascend_device_plugin.allocation.response import parse_slow_node, slow_node_envs
from ascend_device_plugin.dra.state import Checkpoint, CheckpointError
from ascend_device_plugin.levels.level_source import _read_edges
from ascend_device_plugin.ras_topology import RasTarget, sync_once
from dcmi_exporter.backends.dcmi import procstat
from dcmi_exporter.tasks.hang_rule import HangConfig, HangState, Sample, step
from fault_manager.deviceinfo.configmap import parse_upgrade_reasons
from fault_manager.reactor.isolation import IsolationKeeper
from fault_manager.reactor.replay import TimelineError, parse_timeline

from tests.plugin.conftest import close_node, make_node
from tests.plugin.test_kubelet_flow import ALL, R
from tests.support.exporter import ExporterProc, running_exporter
from tests.support.fake_apiserver import FakeApiServer, write_kubeconfig
from tests.support.fake_kubelet import short_tmp_dir
from tests.support.plugin import wait_ready

DEEP = "[" * 50_000 + "]" * 50_000  # 100 KB, far under a ConfigMap's 1 MiB
CHIPS = 8  # the 910b-8 profile


def huge_hang_config() -> str:
    """A valid config (detection off) padded past 1 MiB: read whole, it would be accepted."""
    return json.dumps({"HangDetection": {"Enabled": False}, "pad": "x" * (1 << 20)})


def refused_lines(exporter: ExporterProc, name: str) -> list[dict[str, Any]]:
    return [line for line in exporter.logs() if line.get("input") == name]


def assert_serves_and_names(exporter: ExporterProc, name: str, path: Path, why: str) -> None:
    with exporter.sync_client() as client:
        chips = client.get("/v1/chips")
        assert chips.status_code == 200, chips.text
        assert len(chips.json()["chips"]) == CHIPS
    ready = httpx.get(exporter.metrics_url + "/readyz", timeout=5)
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["status"] == "ready"
    assert body["bad_inputs"][name].startswith(f"{path}: "), body
    assert why in body["bad_inputs"][name], body
    [line] = refused_lines(exporter, name)
    assert line["level"] == "error" and line["path"] == str(path), line
    assert exporter.proc.poll() is None
    assert "Traceback" not in exporter.log_path.read_text()


@pytest.mark.parametrize(
    ("content", "why"),
    [(DEEP, "nested deeper than the limit of 64"), (huge_hang_config(), "over the limit of 1048576 bytes")],
    ids=["deep", "huge"],
)
def test_exporter_runs_on_defaults_with_a_hostile_hang_config(tmp_path: Path, content: str, why: str) -> None:
    config = tmp_path / "hang.json"
    config.write_text(content)
    with running_exporter(tmp_path / "run", "--hang-config", str(config)) as exporter:
        assert_serves_and_names(exporter, "hang_config", config, why)
        assert [line["event"] for line in refused_lines(exporter, "hang_config")] == [
            "hang detection config refused; using the defaults"
        ]
    assert exporter.proc.returncode == 0


def peak_rss_mib(pid: int) -> float:
    """The process's resident high-water mark (VmHWM): what a whole read would have cost, even
    after it was freed."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


@pytest.mark.parametrize("flag", ["--hang-config", "--npu-nic-mapping"])
def test_a_2_gib_input_file_is_read_no_further_than_its_bound(tmp_path: Path, flag: str) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:  # sparse: costs no disk, and a whole read 2 GiB of memory
        f.truncate(2 << 30)
    with running_exporter(tmp_path / "run", flag, str(big), profile="910b-8") as exporter:
        name = "hang_config" if flag == "--hang-config" else "npu_nic_mapping"
        assert_serves_and_names(exporter, name, big, "over the limit of 1048576 bytes")
        # The exporter alone is about 60 MB; the bound leaves room for a loaded machine's noise.
        assert peak_rss_mib(exporter.proc.pid) < 400
    assert exporter.proc.returncode == 0


def test_exporter_runs_without_nic_addresses_with_a_deep_nic_mapping(tmp_path: Path) -> None:
    mapping = tmp_path / "npu-nic-mapping.json"
    mapping.write_text(DEEP)
    with running_exporter(tmp_path / "run", "--npu-nic-mapping", str(mapping), profile="910b-8") as exporter:
        assert_serves_and_names(exporter, "npu_nic_mapping", mapping, "nested deeper than the limit of 64")
        with exporter.sync_client() as client:
            node = client.get("/v1/node").json()
        assert not node.get("nic_addresses") and not node.get("npu_nics"), node
    assert exporter.proc.returncode == 0


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_tmp_dir("hi-") as path:
        yield path


async def test_allocate_answers_with_a_deep_slow_node_value(workdir: Path) -> None:
    """As for a value that is not JSON: no notice, the allocation answered, the plugin says why."""
    with FakeApiServer() as apiserver:
        apiserver.add_node("node-a", internal_ip="10.1.2.3")
        apiserver.add_configmap("steptime-dtpgroup", "kube-system", {"steptime": DEEP})
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", apiserver.url)
        n = await make_node(workdir, "--kubeconfig", str(kubeconfig), "--enable-slow-node", "true", kube="api")
        try:
            await wait_ready(n.plugin)
            await n.kubelet.wait_for(R, lambda m: set(m.devices) == ALL)
            for ids in (["Ascend910-1"], ["Ascend910-2"]):
                resp = await n.kubelet.allocate(R, [ids])
                envs = resp.container_responses[0].envs
                assert "PERF_DUMP_PATH" not in envs and envs["ASCEND_VISIBLE_DEVICES"], envs
            async with httpx.AsyncClient(timeout=5) as ops:
                ready = await ops.get(n.plugin.ops_url + "/readyz")
            assert ready.status_code == 200, ready.text
            why = ready.json()["bad_inputs"]["slow_node_configmap"]
            assert why == "kube-system/steptime-dtpgroup steptime: nested deeper than the limit of 64"
            log = n.plugin.log_path.read_text()
            assert log.count("step time configmap unreadable") == 1, "logged once, not at every Allocate"
            assert "Traceback" not in log and "RecursionError" not in log
        finally:
            await close_node(n)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("DetectDuration", 10**22),  # never reached: detection silently off
        ("DetectDuration", 1441),  # more than a day of rounds at the default 60 s
        ("AICoreUtilization", 101),
        ("HbmMemoryDelta", 101),
        ("TrafficDelta", (1 << 40) + 1),
        ("CPUTimeDelta", 86_400 * 1024 + 1),
    ],
)
def test_a_threshold_past_its_bound_refuses_the_config(key: str, value: int, caplog: pytest.LogCaptureFixture) -> None:
    data = json.dumps({"HangDetection": {"Enabled": True, "Threshold": {key: value}}}).encode()
    assert HangConfig.load(data) == HangConfig()
    [error] = [r for r in caplog.records if r.levelname == "ERROR"]
    assert error.getMessage() == "hang detection config refused; using the defaults"
    assert f"HangDetection.Threshold.{key} {value} is over the limit of" in getattr(error, "error", "")


def test_a_threshold_at_its_bound_is_accepted() -> None:
    data = b'{"HangDetection":{"Threshold":{"DetectDuration":1440,"AICoreUtilization":100}}}'
    assert HangConfig.load(data) == HangConfig(detect_duration=1440, aicore_utilization=100)


def stat_line(pid: int, ticks: int, start: int) -> str:
    # proc(5): pid (comm) state, then fields 4..22; utime is 14, starttime 22.
    fields = ["S", *["0"] * 10, str(ticks), "0", *["0"] * 6, str(start)]
    return f"{pid} (python) {' '.join(fields)}\n"


def test_a_reused_pid_with_less_cpu_time_does_not_count_towards_a_hang(tmp_path: Path) -> None:
    """Job pid 42 ends after 500 s of CPU; the kernel gives 42 to a new process. Its CPU time is
    lower, a negative delta that the rule reads as no progress: it must start a fresh baseline."""
    cfg = HangConfig(detect_duration=1)
    (tmp_path / "42").mkdir()
    state, transitions = HangState(), []
    for ticks, start in ((50_000, 1_000), (0, 90_000), (1_000, 90_000)):
        (tmp_path / "42" / "stat").write_text(stat_line(42, ticks, start))
        times = procstat.read_times(tmp_path, [42], 100)
        state, transition = step(state, Sample((42,), 0, 10, None, times.seconds, times.starts), cfg)
        transitions.append(transition)
    assert transitions == [None, None, None]
    assert procstat.read_times(tmp_path, [42], 100).starts == (90_000,)


# ---------------------------------------------------------------------- each other bounded reader


def test_slow_node_value_nested_deep_is_no_notice() -> None:
    assert slow_node_envs({"steptime": DEEP}) is None
    with pytest.raises(InputError, match=r"^kube-system/steptime-dtpgroup steptime: nested deeper"):
        parse_slow_node({"steptime": DEEP})


def test_ras_topology_source_nested_deep_is_refused_and_nothing_written(tmp_path: Path) -> None:
    source = tmp_path / "topo.json"
    source.write_text(DEEP)
    (tmp_path / "cluster" / "super-pod-1").mkdir(parents=True)
    target = RasTarget(tmp_path / "cluster" / "super-pod-1", tmp_path / "cluster" / "super-pod-1" / "rack-0",
                       tmp_path / "cluster" / "super-pod-1" / "rack-0" / "topo_0.json", source)  # fmt: skip
    with pytest.raises(ValueError, match="nested deeper than the limit of 64"):
        sync_once(target)
    assert not target.rack_dir.exists()


def test_hccl_topology_file_over_the_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "topo.json"
    with path.open("wb") as f:  # sparse: 64 MiB on paper, no disk
        f.truncate(64 << 20)
    with pytest.raises(ValueError, match=f"over the limit of {50 << 20} bytes"):
        _read_edges(path)


def test_dra_checkpoint_nested_deep_is_a_corrupt_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "checkpoint.json").write_text(DEEP)
    with pytest.raises(CheckpointError, match="nested deeper than the limit of 64"):
        Checkpoint(tmp_path).load()


def test_upgrade_fault_reason_nested_deep_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"UpgradeFaultReason is not JSON: .*nested deeper"):
        parse_upgrade_reasons('{"Ascend910-0":' + DEEP + "}")


def test_device_info_cfg_nested_deep_falls_back_to_the_held_isolations() -> None:
    store = SimpleNamespace(manual=SimpleNamespace(chips=lambda: {"Ascend910-3"}))
    keeper = IsolationKeeper(cast(Any, None), cast(Any, store), cast(Any, None), cast(Any, None), None, "cm")
    assert keeper.as_written({"DeviceInfoCfg": DEEP}, set()) == {"Ascend910-3"}


def test_replay_timeline_line_nested_deep_is_a_timeline_error() -> None:
    with pytest.raises(TimelineError, match=r"^line 2: not JSON: .*nested deeper"):
        list(parse_timeline(['{"t": 1, "query": true}', DEEP]))
