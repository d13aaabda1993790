"""What a service's code costs before it does anything: memory and CPU time of its imports alone.

A Python service's floor is the modules it loads. When a service misses its memory target, this
says how much of it is code rather than data; when the cold start misses, how much CPU the
three services need just to load theirs. Measured in fresh interpreters, before the timed
scenarios. The kubernetes client loads its API classes on first use, so the probes touch
`CoreV1Api` as every --kube api service does.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from bench.apiserver import ROOT

K8S = "kubernetes.client:CoreV1Api"
# What each service loads before it serves in --kube api mode (its app module pulls in the rest).
SERVICE_MODULES = {
    "dcmi-exporter": ("dcmi_exporter.cli", "dcmi_exporter.backends.sim"),
    "device-plugin": ("ascend_device_plugin.app", K8S),
    "fault-manager": ("fault_manager.app", K8S),
}
# The large third-party libraries among them.
LIBRARIES = {
    "fastapi + uvicorn": ("fastapi", "uvicorn"),
    "kubernetes client (with CoreV1Api)": (K8S,),
    "SQLAlchemy + SQLModel": ("sqlalchemy", "sqlmodel"),
    "grpcio + protobuf": ("grpc", "google.protobuf"),
}

# In the dev venv some libraries load optional extras the image does not have: httpx its CLI
# (rich and pygments, here for ascendctl and the tests; click stays: uvicorn needs it), kubernetes its
# client-side validation (kubernetes_validate, jsonschema: here for the deploy tests). Blocking them gives
# the import floor as deployed.
DEV_ONLY = ("rich", "pygments", "kubernetes_validate", "jsonschema", "typer")
# `module` or `module:attribute` (an attribute loaded lazily on first use), after the comma-joined
# top-level packages to block (empty: none).
_PROBE = """
import importlib, importlib.abc, sys, psutil
BLOCKED = set(filter(None, sys.argv[1].split(",")))
class DevOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(name)
if BLOCKED:
    sys.meta_path.insert(0, DevOnly())
for name in sys.argv[2:]:
    module, _, attr = name.partition(":")
    loaded = importlib.import_module(module)
    if attr:
        getattr(loaded, attr)
p = psutil.Process()
t = p.cpu_times()
print(p.memory_info().rss, t.user + t.system)
"""


@dataclass(frozen=True)
class Imports:
    rss_mb: float  # resident memory of the interpreter after the imports
    cpu_s: float  # CPU time the interpreter took to start and import them


@functools.cache
def probe(modules: Sequence[str], *, as_deployed: bool = False) -> Imports:
    """A fresh interpreter importing `modules` (a tuple, so that the answer is cached);
    `as_deployed`: without the dev venv's extras (DEV_ONLY)."""
    blocked = ",".join(DEV_ONLY) if as_deployed else ""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, blocked, *modules], capture_output=True, text=True, cwd=ROOT, check=True,
        timeout=120,
    )  # fmt: skip
    rss, cpu = out.stdout.split()
    return Imports(int(rss) / 2**20, float(cpu))


def service_imports(service: str) -> Imports | None:
    """What `service`'s imports alone cost; None for a name not in SERVICE_MODULES."""
    modules = SERVICE_MODULES.get(service)
    return probe(modules) if modules is not None else None


def service_floor_mb(service: str) -> float | None:
    imports = service_imports(service)
    return imports.rss_mb if imports is not None else None


def warm() -> None:
    """Run every probe now, before the timed scenarios, so that none runs in the middle of one."""
    footprint_notes()


def footprint_notes() -> list[str]:
    """One line per service, then what each large library adds to a bare interpreter."""
    bare = probe(())
    lines = []
    for name, modules in SERVICE_MODULES.items():
        imports = probe(modules)
        deployed = probe(modules, as_deployed=True)
        lines.append(
            f"{name}: {imports.rss_mb:.0f} MB resident and {imports.cpu_s:.1f} s of CPU for its imports alone"
            f" ({', '.join(modules)}); {deployed.rss_mb:.0f} MB without the dev venv's extras that the image"
            f" does not have ({', '.join(DEV_ONLY)})"
        )
    libs = ", ".join(
        f"{lib} +{probe(mods).rss_mb - bare.rss_mb:.0f} MB, +{probe(mods).cpu_s - bare.cpu_s:.1f} s"
        for lib, mods in LIBRARIES.items()
    )
    lines.append(f"a bare interpreter: {bare.rss_mb:.0f} MB, {bare.cpu_s:.2f} s; each library on its own adds: {libs}")
    return lines
