"""Figures of the real-node tiers (the cluster tier and compose under podman) in
docs/benchmarks.md: runs them, then writes their section between its markers.

    .venv/bin/python -m bench.realnode            run both tiers (root), then write the section
    .venv/bin/python -m bench.realnode --no-run   write the section from the last run's figures

The tiers record what they measure in .state/real-node/figures.json (tests/support/realnode.py);
`./dev image` records its last build beside the archive. `python -m bench.run` keeps the section.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.report import Machine

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
FIGURES = ROOT / ".state" / "real-node" / "figures.json"
IMAGE_BUILD = ROOT / ".state" / "image" / "ascend-node-stack.tar.build.json"
BEGIN = "<!-- real-node: written by `python -m bench.realnode`; bench.run keeps it -->"
END = "<!-- /real-node -->"
COMMAND = "sudo .venv/bin/python -m bench.realnode  (or: ./dev test tests/compose/test_podman.py tests/cluster)"

# (figure key, what it is, how to read it)
ROWS: tuple[tuple[str, str, str], ...] = (
    ("cluster_up_s", "`cluster.sh up` to node Ready (binaries and certs cached)", "s"),
    ("stack_ready_after_apply_s", "`kubectl apply -k` (simulated overlay) to 3 pods Ready", "s"),
    ("fault_to_configmap_unhealthy_s", "fault injected -> chip in `-Unhealthy` of the device-info ConfigMap", "s"),
    ("fault_to_node_allocatable_s", "fault injected -> node allocatable 8 -> 7", "s"),
    ("recovery_to_node_allocatable_s", "fault recovered -> node allocatable 7 -> 8", "s"),
    ("recovery_to_configmap_s", "fault recovered -> chip back in the ConfigMap's free list", "s"),
    ("plugin_pod_deleted_to_registered_s", "plugin pod deleted -> new pod registered with the kubelet", "s"),
    ("plugin_pod_deleted_to_ready_s", "plugin pod deleted -> new pod Ready", "s"),
    ("kubelet_restart_to_plugin_registered_s", "kubelet restarted -> plugin registered again", "s"),
    ("kubelet_socket_to_plugin_registered_ms", "new kubelet.sock -> plugin registered (the plugin's share)", "ms"),
    ("kubelet_restart_to_allocatable_restored_s", "kubelet restarted -> fresh node status, allocatable 8", "s"),
    ("rolling_update_image_tag_s", "rolling update, new image tag, 3 DaemonSets -> all Ready", "s"),
    ("rolling_update_plugin_argument_s", "rolling update, plugin argument (`--volcano-type`) -> Ready", "s"),
    ("rolling_update_exporter_argument_s", "rolling update, exporter argument (`--hang-interval 1`) -> Ready", "s"),
    ("idle_job_to_configmap_fault_s", "sim idle job (1 s rounds, DetectDuration 5) -> `200001002` in `-Fault`", "s"),
    ("rolling_update_soft_share_s", "rolling update, soft-share component applied -> Ready, allocatable 800", "s"),
    (
        "rolling_update_a5_profile_to_level_lists_s",
        "950 profile and component applied -> Ready, allocatable npu 8, every chip's `levelList` published",
        "s",
    ),
    ("ub_port_down_to_node_allocatable_s", "950: sim UB port down -> node allocatable `huawei.com/npu` 7", "s"),
    ("ub_port_up_to_node_allocatable_s", "950: sim UB port back up -> node allocatable `huawei.com/npu` 8", "s"),
    ("compose_up_to_all_ready_s", "`podman-compose up -d` -> all three /readyz 200", "s"),
    ("compose_fault_to_verdict_ms", "compose: fault injected -> fault-manager verdict", "ms"),
)
NOTES = (
    "The test cluster is Kubernetes 1.20.2 built from Debian's source package, containerd 1.6 and"
    " runc, on this 2-core machine; the kubelet posts its node status every 1 s"
    " (`nodeStatusUpdateFrequency`; the default is 10 s, which adds up to 10 s to every"
    " 'node allocatable' figure on a default kubelet). The kubelet's device manager hears a fault"
    " from the plugin in milliseconds (the fake-kubelet figures above); node allocatable follows"
    " at the next node status, and the ConfigMap at the fault-manager's next write (`--write-interval`,"
    " 1 s).",
    "'Plugin pod deleted' and the rolling updates wait for the 1.20 kubelet to finalise the old pod"
    " before the DaemonSet controller creates the new one: 5-7 s usually, up to a minute when that"
    " waits for its container garbage collection (every 60 s). The plugin itself registers within"
    " milliseconds of a kubelet socket (the 'kubelet.sock' row).",
    "Each figure is one run of the tiers (the fault rounds: p50 and max of 10); they measure the"
    " deploy path, not a target of the architecture document.",
)


def _value(figures: dict[str, Any], key: str, unit: str) -> str:
    entry = figures.get(key)
    if entry is None:
        return "not measured"
    value = entry["value"]
    if isinstance(value, dict):
        return f"p50 {value['p50']} {unit}, max {value['max']} {unit} (n={value['n']})"
    return f"{value} {unit}"


def section(figures: dict[str, Any], image: dict[str, Any] | None) -> str:
    taken = sorted({e["at"] for e in figures.values()})
    lines = [
        BEGIN,
        "## Real node: cluster tier and compose",
        "",
        f"Run: `{COMMAND}`; figures taken {taken[0] if taken else '-'} to {taken[-1] if taken else '-'}"
        f" on {Machine.here().describe()}.",
        "",
        "| figure | measured |",
        "|---|---|",
        *[f"| {what} | {_value(figures, key, unit)} |" for key, what, unit in ROWS],
    ]
    if image is not None:
        base = {True: "Debian base cached", False: "debootstrap included", None: "-"}[image.get("base_cached")]
        lines.append(
            f"| `./dev image` ({image['route']} route, {base}) | {image['seconds']} s,"
            f" {image['bytes'] / 2**20:.0f} MiB archive |"
        )
    lines += ["", *[f"- {note}" for note in NOTES], END]
    return "\n".join(lines)


def splice(doc: str, block: str) -> str:
    """The doc with its real-node block replaced by `block` (appended when it has none)."""
    if BEGIN in doc and END in doc:
        head, _, rest = doc.partition(BEGIN)
        _, _, tail = rest.partition(END)
        return head + block + tail
    return doc.rstrip("\n") + "\n\n" + block + "\n"


def kept_block(doc: str) -> str | None:
    """The real-node block of a doc, for bench.run to carry over when it rewrites the doc."""
    if BEGIN in doc and END in doc:
        return BEGIN + doc.partition(BEGIN)[2].partition(END)[0] + END
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-run", action="store_true", help="only write the section from the last figures")
    args = parser.parse_args()
    if not args.no_run:
        FIGURES.unlink(missing_ok=True)
        started = time.monotonic()
        tests = ["tests/compose/test_podman.py", "tests/cluster"]
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=ROOT)
        print(f"real-node tiers: exit {done.returncode} in {time.monotonic() - started:.0f} s")
        if done.returncode != 0:
            return done.returncode
    figures = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    image = json.loads(IMAGE_BUILD.read_text()) if IMAGE_BUILD.exists() else None
    block = section(figures, image)
    print(block)
    DOC.write_text(splice(DOC.read_text(), block))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
