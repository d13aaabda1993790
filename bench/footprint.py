"""What a service's code costs before it does anything: memory and CPU time of its imports alone.

A Python service's floor is the modules it loads. When a service misses its memory target, this
says how much of it is code rather than data, and which packages that code comes from; when the
cold start misses, how much CPU the three services need just to load theirs. Measured in fresh
interpreters, before the timed scenarios. A --kube api service loads the kubernetes asyncio client's
ApiClient and config (kubernetes.aio, through ascend_common.adapters.kube), so the probes load those
as such a service does.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.apiserver import ROOT

# The architecture's resident-memory targets on the 8-chip node, and what 10,000 cached pods may
# add to each of the two services that cache them (the exporter caches none).
# Revised in issue 22: what counts is what the libraries cost used as their authors intend them
# (kubernetes.aio loads the whole kubernetes package, about 46 MB as the adapters load it).
RSS_TARGET_MB = {"dcmi-exporter": 60.0, "device-plugin": 110.0, "fault-manager": 130.0}
CACHED_PODS_MB = 15.0
POD_CACHING = ("device-plugin", "fault-manager")


def rss_target_mb(service: str, *, pods_cached: bool = False) -> float:
    """`service`'s resident-memory target; `pods_cached`: with 10,000 pods in its cache."""
    extra = CACHED_PODS_MB if pods_cached and service in POD_CACHING else 0.0
    return RSS_TARGET_MB[service] + extra


K8S = "ascend_common.adapters.kube.config"  # kubernetes.aio's ApiClient and config, and our REST calls
# What each service loads before it serves in --kube api mode (its app module pulls in the rest).
SERVICE_MODULES = {
    "dcmi-exporter": ("dcmi_exporter.cli", "dcmi_exporter.backends.sim"),
    "device-plugin": ("ascend_device_plugin.app", K8S),
    "fault-manager": ("fault_manager.app", K8S),
}
# The large third-party libraries among them.
LIBRARIES = {
    "fastapi + uvicorn": ("fastapi", "uvicorn"),
    "kubernetes client as the adapters load it (kubernetes.aio: ApiClient, config, watch)": (K8S,),
    "SQLAlchemy (Core)": ("sqlalchemy",),
    "grpcio + protobuf": ("grpc", "google.protobuf"),
}
# Code a service loads only when it needs it, and what it would cost at start-up: the levers
# taken, measured on every run so that a regression shows.
DEFERRED: dict[str, dict[str, tuple[str, ...]]] = {
    "dcmi-exporter": {
        "the sim scenario runner (YAML and its models), now loaded when --scenario is given": (
            "dcmi_exporter.backends.sim.scenario",
        ),
        "the Kubernetes client and gRPC, which no exporter module reaches (tests/test_boundaries.py)": (
            K8S,
            "grpc",
        ),
    },
    **{
        service: {
            "the kubernetes asyncio client's generated CoreV1Api and its models, replaced by raw REST calls"
            " through the ApiClient (ascend_common.adapters.kube.client.CoreV1)": ("kubernetes.aio.client:CoreV1Api",),
        }
        for service in POD_CACHING
    },
}

# In the dev venv some libraries find optional extras the image does not have: rich and pygments (for
# ascendctl and the tests; httpx's CLI loads them where they are installed), kubernetes' client-side
# validation (kubernetes_validate, jsonschema: here for the deploy tests). Blocking them gives the
# import floor as deployed.
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
# The same imports, each module's own execution timed in resident memory: what runs while a
# module's body runs, less what the modules it imports add, is that module's. Prints
# {module: bytes} and the interpreter's resident memory before the first import, as JSON.
_BY_MODULE = """
import importlib, importlib.abc, json, sys, psutil
BLOCKED = set(filter(None, sys.argv[1].split(",")))
rss = psutil.Process().memory_info
own, stack = {}, []
class Timed(importlib.abc.Loader):
    def __init__(self, inner, name):
        self.inner, self.name = inner, name
    def __getattr__(self, attr):  # get_resource_reader and the rest: the real loader's
        return getattr(self.inner, attr)
    def create_module(self, spec):
        start = rss().rss
        module = self.inner.create_module(spec)  # an extension module's shared library loads here
        grown = rss().rss - start
        own[self.name] = own.get(self.name, 0) + grown
        if stack:
            stack[-1] += grown
        return module
    def exec_module(self, module):
        start = rss().rss
        stack.append(0)
        try:
            self.inner.exec_module(module)
        finally:
            inner, total = stack.pop(), rss().rss - start
            own[self.name] = own.get(self.name, 0) + total - inner
            if stack:
                stack[-1] += total
class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(name)
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = Timed(spec.loader, name)
                return spec
        return None
base = rss().rss
sys.meta_path.insert(0, Finder())
for name in sys.argv[2:]:
    module, _, attr = name.partition(":")
    loaded = importlib.import_module(module)
    if attr:
        getattr(loaded, attr)
print(json.dumps({"base": base, "end": rss().rss, "own": own}))
"""
OURS = ("ascend_common", "dcmi_exporter", "ascend_device_plugin", "fault_manager", "ascendctl")


@dataclass(frozen=True)
class Imports:
    rss_mb: float  # resident memory of the interpreter after the imports
    cpu_s: float  # CPU time the interpreter took to start and import them


INTERPRETER = "interpreter (with the probe's psutil)"


@dataclass(frozen=True)
class Floor:
    """A service's import floor as deployed: the total, and each package's share of it (MB)."""

    service: str
    total_mb: float
    by_package: dict[str, float]


@dataclass(frozen=True)
class Footprint:
    notes: list[str]
    floors: list[Floor]


def _run(script: str, modules: Sequence[str], as_deployed: bool) -> str:
    blocked = ",".join(DEV_ONLY) if as_deployed else ""
    return subprocess.run(
        [sys.executable, "-c", script, blocked, *modules], capture_output=True, text=True, cwd=ROOT, check=True,
        timeout=120,
    ).stdout  # fmt: skip


@functools.cache
def probe(modules: Sequence[str], *, as_deployed: bool = False) -> Imports:
    """A fresh interpreter importing `modules` (a tuple, so that the answer is cached);
    `as_deployed`: without the dev venv's extras (DEV_ONLY)."""
    rss, cpu = _run(_PROBE, modules, as_deployed).split()
    return Imports(int(rss) / 2**20, float(cpu))


def package_of(module: str, providers: Mapping[str, list[str]]) -> str:
    """The name a module's memory is booked under: its distribution, the standard library, or ours
    (ascend_common's adapters apart from its domain)."""
    top = module.split(".")[0]
    if top in OURS:
        return "ascend_common.adapters" if module.startswith("ascend_common.adapters") else top
    if top in providers:
        return providers[top][0]
    return "standard library" if top in sys.stdlib_module_names or top.startswith("_") else top


@functools.cache
def floor_by_package(service: str) -> Floor:
    """What each package adds to `service`'s import floor, as deployed."""
    out = json.loads(_run(_BY_MODULE, SERVICE_MODULES[service], True))
    providers = importlib.metadata.packages_distributions()
    sizes = {INTERPRETER: out["base"] / 2**20}
    for module, size in out["own"].items():
        package = package_of(module, providers)
        sizes[package] = sizes.get(package, 0.0) + size / 2**20
    return Floor(service, out["end"] / 2**20, sizes)


def service_imports(service: str) -> Imports | None:
    """What `service`'s imports alone cost; None for a name not in SERVICE_MODULES."""
    modules = SERVICE_MODULES.get(service)
    return probe(modules) if modules is not None else None


def service_floor_mb(service: str) -> float | None:
    imports = service_imports(service)
    return imports.rss_mb if imports is not None else None


def warm() -> None:
    """Run every probe now, before the timed scenarios, so that none runs in the middle of one."""
    footprint()


def footprint() -> Footprint:
    """One line per service, what each large library adds to a bare interpreter, the levers and
    what they save; then each service's floor by package."""
    bare = probe(())
    lines = []
    for name, modules in SERVICE_MODULES.items():
        imports = probe(modules)
        deployed = probe(modules, as_deployed=True)
        lines.append(
            f"{name}: {imports.rss_mb:.0f} MB resident and {imports.cpu_s:.1f} s of CPU for its imports alone"
            f" ({', '.join(modules)}); {deployed.rss_mb:.0f} MB without the dev venv's extras that the image"
            f" does not have ({', '.join(DEV_ONLY)}); target {rss_target_mb(name):g} MB running"
        )
    libs = ", ".join(
        f"{lib} +{probe(mods).rss_mb - bare.rss_mb:.0f} MB, +{max(0.0, probe(mods).cpu_s - bare.cpu_s):.1f} s"
        for lib, mods in LIBRARIES.items()
    )
    lines.append(f"a bare interpreter: {bare.rss_mb:.0f} MB, {bare.cpu_s:.2f} s; each library on its own adds: {libs}")
    for name, levers in DEFERRED.items():
        modules = SERVICE_MODULES[name]
        saved = "; ".join(
            f"{what}: +{probe((*modules, *extra)).rss_mb - probe(modules).rss_mb:.1f} MB if loaded at start"
            for what, extra in levers.items()
        )
        lines.append(f"{name}, code left out of its start-up: {saved}")
    return Footprint(lines, [floor_by_package(name) for name in SERVICE_MODULES])
