"""Cold start of the whole stack to the first full ListAndWatch.

The three services are started together from nothing (no socket, no SQLite file), as a node's
DaemonSets start: none waits for another. The clock runs from the first process start to the
first ListAndWatch message in which the kubelet sees every chip Healthy. Each service's own
start-up (to its "serving" log line) is read from its log, to tell start-up from hand-over.
The fake API server (empty node) is up before, as a cluster is.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bench.apiserver import RemoteApiServer
from bench.figures import Figure, Section, ms, verdict
from bench.footprint import service_imports
from bench.pods import NODE
from bench.stack import EXPORTER_ARGS, R, StackConfig, plugin_args, start_fm
from tests.support.exporter import start_exporter
from tests.support.fake_apiserver import write_kubeconfig
from tests.support.fake_kubelet import FakeKubelet, short_tmp_dir
from tests.support.plugin import start_plugin

TIMEOUT_S = 30.0
TARGET_S = 3.0
CHIPS = {f"Ascend910-{i}" for i in range(8)}
CONFIG = StackConfig(fault_manager=True, kube="api")
SERVING = {"dcmi-exporter": "dcmi-exporter serving", "fault-manager": "fault-manager serving",
           "device-plugin": "ascend-device-plugin serving"}  # fmt: skip


@dataclass
class ColdStart:
    listed_s: float | None  # to the first all-Healthy ListAndWatch; None: not within TIMEOUT_S
    serving_s: dict[str, float] = field(default_factory=dict)  # each service's start to its "serving" line

    def describe(self) -> str:
        total = "never listed" if self.listed_s is None else ms(self.listed_s)
        each = ", ".join(f"{name} {ms(s)}" for name, s in self.serving_s.items())
        return f"{total} ({each})" if each else total


def serving_after(log: Path, event: str, started_wall: float) -> float | None:
    """Seconds from `started_wall` to the first log line of `event` (JSON logs, UTC timestamps)."""
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("event") == event:
            at = datetime.fromisoformat(str(record["ts"]).replace("Z", "+00:00")).timestamp()
            return at - started_wall
    return None


async def cold_start(api_url: str) -> ColdStart:
    with short_tmp_dir("cold-") as workdir:
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", api_url)
        kubelet = FakeKubelet(workdir / "dp", workdir / "podres")
        await kubelet.start()
        started, started_wall = time.monotonic(), time.time()
        exporter = start_exporter(workdir / "exporter", *EXPORTER_ARGS, wait_ready=False)
        fm = start_fm(workdir, exporter, CONFIG, kubeconfig)
        plugin = start_plugin(workdir, exporter, workdir / "dp", *plugin_args(CONFIG, fm, kubeconfig), kube="api")
        result = ColdStart(None)
        try:
            msg = await kubelet.wait_for(R, lambda m: m.healthy == CHIPS, timeout=TIMEOUT_S)
            result.listed_s = msg.at - started
        except TimeoutError:
            pass
        finally:
            plugin.stop()
            await kubelet.stop()
            fm.stop()
            exporter.stop()
        logs = {"dcmi-exporter": exporter.log_path, "fault-manager": fm.log_path, "device-plugin": plugin.log_path}
        for name, log in logs.items():
            if (after := serving_after(log, SERVING[name], started_wall)) is not None:
                result.serving_s[name] = after
        return result


def startup_reason(results: list[ColdStart]) -> str:
    """Why a start was slow: the CPU the services need to load their code, and when they served."""
    imports = {name: service_imports(name) for name in SERVING}
    cpu = {name: i.cpu_s for name, i in imports.items() if i is not None}
    slowest = max(results, key=lambda r: r.listed_s or 0.0)
    serving = max(slowest.serving_s.values(), default=0.0)
    each = ", ".join(f"{name} {s:.1f} s" for name, s in cpu.items())
    return (
        f"loading the code alone takes {sum(cpu.values()):.1f} s of CPU ({each}) on {os.cpu_count()} shared"
        f" cores; in the slowest start the last service logged that it was serving after {ms(serving)}"
    )


def figure(results: list[ColdStart]) -> Figure:
    """The slowest start (every start must make it); one that never listed is a miss, stated in the row."""
    listed = [r.listed_s for r in results if r.listed_s is not None]
    failed = len(results) - len(listed)
    value = f"{ms(max(listed))} (median {ms(statistics.median(listed))})" if listed else "-"
    if failed:
        value += f"; {failed} of {len(results)} starts never listed within {TIMEOUT_S:g} s"
    met = not failed and max(listed) <= TARGET_S
    why = "starts that never listed" if failed else startup_reason(results)
    return Figure(
        f"cold start of the whole stack -> first ListAndWatch, all Healthy (slowest of {len(results)})",
        value,
        f"<= {TARGET_S:g} s",
        verdict=verdict(met, why),
    )


async def run(starts: int) -> Section:
    began = time.monotonic()
    section = Section("Cold start (910b-8)", "`.venv/bin/python -m bench.run --only coldstart`")
    with RemoteApiServer() as api:
        api.add_node(NODE)
        results = [await cold_start(api.url) for _ in range(starts)]
    section.figures.append(figure(results))
    section.notes.append(
        "Exporter, fault-manager and device-plugin (following the fault-manager, --kube api) started at once."
        " Each start, and in brackets when each service logged that it was serving: "
        + "; ".join(r.describe() for r in results)
        + "."
    )
    section.seconds = time.monotonic() - began
    return section
