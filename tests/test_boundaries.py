"""Import boundaries of the architecture doc, checked on the source (ast), not by convention."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "ascend_common": ROOT / "libs/common/src/ascend_common",
    "dcmi_exporter": ROOT / "services/dcmi-exporter/src/dcmi_exporter",
    "ascend_device_plugin": ROOT / "services/device-plugin/src/ascend_device_plugin",
    "fault_manager": ROOT / "services/fault-manager/src/fault_manager",
}
SERVICES = {"dcmi_exporter", "ascend_device_plugin", "fault_manager"}


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
