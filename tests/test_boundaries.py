"""Import boundaries of the architecture doc, checked on the source (ast), not by convention.

Direct imports: no service imports another, libs/common imports none. Through every chain of
imports (tests/support/import_graph.py): the exporter reaches neither the Kubernetes client nor
gRPC, the domain layer of ascend_common reaches no I/O library and no adapter, and each service
reaches only libraries its pyproject asks for (with the ascend-common extras it names).
"""

from __future__ import annotations

import ast
import importlib.metadata
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from tests.support.distributions import closure
from tests.support.import_graph import ImportGraph, chain_text

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "ascend_common": ROOT / "libs/common/src/ascend_common",
    "dcmi_exporter": ROOT / "services/dcmi-exporter/src/dcmi_exporter",
    "ascend_device_plugin": ROOT / "services/device-plugin/src/ascend_device_plugin",
    "fault_manager": ROOT / "services/fault-manager/src/fault_manager",
    "ascendctl": ROOT / "services/ascendctl/src/ascendctl",
}
SERVICES = {"dcmi_exporter", "ascend_device_plugin", "fault_manager"}
DISTRIBUTION_OF = {
    "dcmi_exporter": "dcmi-exporter",
    "ascend_device_plugin": "ascend-device-plugin",
    "fault_manager": "fault-manager",
    "ascendctl": "ascendctl",
}
# The privileged exporter holds no cluster credentials and speaks no gRPC.
NOT_IN_THE_EXPORTER = ("kubernetes", "grpc", "google.protobuf")
# The domain layer is pure: none of these, directly or through anything it imports.
IO_LIBRARIES = (
    "kubernetes", "urllib3", "grpc", "google.protobuf", "httpx", "httpcore", "h11", "uvicorn", "fastapi",
    "starlette", "anyio", "prometheus_client", "sqlite3", "sqlalchemy", "sqlmodel", "socket", "socketserver",
    "ssl", "select", "selectors", "threading", "_thread", "concurrent", "asyncio", "multiprocessing",
    "subprocess", "ctypes", "http", "urllib.request", "signal", "faulthandler", "pydantic_settings", "yaml",
)  # fmt: skip
ADAPTERS = "ascend_common.adapters"


@cache
def graph() -> ImportGraph:
    return ImportGraph(PACKAGES)


def imported_roots(package_dir: Path) -> dict[str, set[str]]:
    """Top-level module names imported by each file of a package."""
    out: dict[str, set[str]] = {}
    for path in package_dir.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        out[str(path.relative_to(ROOT))] = names
    return out


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_service_imports_another_service_and_common_imports_none(package: str) -> None:
    forbidden = SERVICES - {package}
    for path, names in imported_roots(PACKAGES[package]).items():
        assert not names & forbidden, f"{path} imports {names & forbidden}"
        assert "tests" not in names and "tools" not in names, f"{path} imports a test double or a tool"


def libraries_loaded(path: Path) -> list[str]:
    """What each `CDLL(...)` / `cdll.LoadLibrary(...)` call in a file loads ("<process>" for None)."""
    loaded = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name in ("CDLL", "LoadLibrary"):
                arg = node.args[0] if node.args else None
                is_none = isinstance(arg, ast.Constant) and arg.value is None
                loaded.append("<process>" if is_none else ast.unparse(arg) if arg else "?")
    return loaded


def test_only_the_exporter_loads_a_library_and_it_holds_no_cluster_client() -> None:
    for package in PACKAGES:
        for path, names in imported_roots(PACKAGES[package]).items():
            if package == "dcmi_exporter":
                assert "kubernetes" not in names, f"{path}: the exporter holds no cluster credentials"
                continue
            # Elsewhere only the process's own libc may be reached (the plugin's inotify binding).
            assert set(libraries_loaded(ROOT / path)) <= {"<process>"}, f"{path} loads a shared library"


def test_the_library_check_sees_the_exporters_own_load() -> None:
    loads = [lib for path in PACKAGES["dcmi_exporter"].rglob("*.py") for lib in libraries_loaded(path)]
    assert any(lib != "<process>" for lib in loads), "the check would miss a library load"


# -- through every chain of imports -------------------------------------------------------------


def unwanted(g: ImportGraph, modules: Iterable[str], targets: Iterable[str]) -> list[str]:
    """One line per target in `targets` that `modules` reach, with the chain that reaches it."""
    return [f"{target}: {chain_text(chain)}" for target, chain in sorted(g.reached(modules, matching=targets).items())]


def test_the_exporter_reaches_neither_kubernetes_nor_grpc() -> None:
    g = graph()
    found = unwanted(g, g.modules("dcmi_exporter"), NOT_IN_THE_EXPORTER)
    assert not found, "the exporter reaches:\n" + "\n".join(found)


def domain_modules(g: ImportGraph) -> list[str]:
    outside = (ADAPTERS,)
    return [m for m in g.modules("ascend_common") if not any(m == o or m.startswith(o + ".") for o in outside)]


def test_the_domain_reaches_no_io_library_and_no_adapter() -> None:
    g = graph()
    domain = domain_modules(g)
    assert {"ascend_common.chips", "ascend_common.pods", "ascend_common.faults.policy"} <= set(domain)
    found = unwanted(g, domain, (*IO_LIBRARIES, ADAPTERS))
    assert not found, "the domain reaches:\n" + "\n".join(found)


def test_the_checks_fail_on_a_chain_of_two_modules(tmp_path: Path) -> None:
    """A module that reaches kubernetes through two others, one by a function-level import."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def later() -> None:\n    from . import c\n")
    (pkg / "c.py").write_text("import kubernetes.client\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import grpc\n")
    g = ImportGraph({"pkg": pkg})
    chain = "pkg.a -> pkg.b -> pkg.c -> kubernetes.client"
    assert unwanted(g, ["pkg.a"], NOT_IN_THE_EXPORTER) == [f"kubernetes.client: {chain}"]
    assert unwanted(g, ["pkg.typed"], NOT_IN_THE_EXPORTER) == []  # never runs
    with pytest.raises(AssertionError, match="kubernetes"):
        assert not unwanted(g, g.modules("pkg"), NOT_IN_THE_EXPORTER), "kubernetes reached"


# -- what each service reaches is what it asks for ----------------------------------------------


@pytest.mark.parametrize("package", sorted(DISTRIBUTION_OF))
def test_each_service_reaches_only_libraries_it_asks_for(package: str) -> None:
    g = graph()
    installed = closure(DISTRIBUTION_OF[package])
    providers = importlib.metadata.packages_distributions()
    strays = [
        f"{top}: {chain_text(chain)}"
        for top, chain in sorted(g.third_party(g.modules(package)).items())
        if not {canonicalize_name(d) for d in providers.get(top, [])} & installed
    ]
    assert not strays, f"{package} reaches libraries its pyproject does not ask for:\n" + "\n".join(strays)


def test_installing_the_exporter_pulls_neither_kubernetes_nor_grpc() -> None:
    installed = closure("dcmi-exporter")
    assert {"ascend-common", "fastapi", "uvicorn", "pydantic-settings"} <= installed
    assert not installed & {"kubernetes", "grpcio", "protobuf"}, sorted(installed)
    assert {"kubernetes", "grpcio", "httpx"} <= closure("ascend-device-plugin")
