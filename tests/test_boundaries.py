"""Import boundaries of the architecture doc, checked on the source, not by convention.

The rules are import-linter contracts in pyproject.toml (`[tool.importlinter]`), checked through every
chain of imports, function-level ones included: the exporter reaches neither the Kubernetes client nor
gRPC, the domain layer of ascend_common reaches no I/O library and no adapter, no service imports
another, libs/common imports none, the plugin's rules are pure, and so on. Here: the contracts run (so
`./dev test` runs them), a contract is shown to fail on a package that breaks it, and the rules
import-linter cannot express (each service reaches only libraries its pyproject asks for; only the
exporter loads a shared library) are checked with grimp, import-linter's own graph.
"""

from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import grimp
import pytest
from packaging.utils import canonicalize_name

from tests.support.distributions import closure

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = {
    "ascend_common": ROOT / "libs/common/src/ascend_common",
    "dcmi_exporter": ROOT / "services/dcmi-exporter/src/dcmi_exporter",
    "ascend_device_plugin": ROOT / "services/device-plugin/src/ascend_device_plugin",
    "fault_manager": ROOT / "services/fault-manager/src/fault_manager",
    "ascendctl": ROOT / "services/ascendctl/src/ascendctl",
}
DISTRIBUTION_OF = {
    "dcmi_exporter": "dcmi-exporter",
    "ascend_device_plugin": "ascend-device-plugin",
    "fault_manager": "fault-manager",
    "ascendctl": "ascendctl",
}
ADAPTERS = "ascend_common.adapters"


def contracts() -> dict[str, dict[str, Any]]:
    """The import-linter contracts of pyproject.toml, by id."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def lint_imports(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_the_import_contracts_are_kept() -> None:
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Contracts: {len(contracts())} kept, 0 broken." in run.stdout, run.stdout


def test_the_domain_contract_names_every_module_of_the_domain() -> None:
    """A new module of ascend_common is in the domain (and so pure) unless it is an adapter."""
    folder = PACKAGES["ascend_common"]
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    domain = {f"ascend_common.{m}" for m in modules} - {ADAPTERS}
    assert set(contracts()["domain"]["source_modules"]) == domain
    assert ADAPTERS in contracts()["domain"]["forbidden_modules"]


def test_the_plugin_purity_contract_sorts_every_module_of_the_plugin() -> None:
    """Each module of the device-plugin is a rule (its purity checked) or I/O that no rule may
    import: a new module lands on one side, so the contract cannot lose track of it."""
    folder = PACKAGES["ascend_device_plugin"]
    modules = {
        "ascend_device_plugin." + ".".join(p.relative_to(folder).with_suffix("").parts)
        for p in folder.rglob("*.py")
        if p.stem != "__init__"
    }
    pure = contracts()["plugin-pure"]
    rules = set(pure["source_modules"])
    io = [m for m in pure["forbidden_modules"] if m.startswith("ascend_device_plugin.")]

    def is_io(module: str) -> bool:
        return any(module == m or module.startswith(m + ".") for m in io)

    assert rules <= modules, sorted(rules - modules)
    assert not [m for m in rules if is_io(m)]
    assert sorted(m for m in modules if m not in rules and not is_io(m)) == []


def test_a_contract_fails_on_a_chain_of_two_modules(tmp_path: Path) -> None:
    """The exporter's contract over a package that reaches kubernetes through two modules, one by a
    function-level import; an import under TYPE_CHECKING never runs and breaks nothing."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def later() -> None:\n    from . import c\n")
    (pkg / "c.py").write_text("import kubernetes.client\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import grpc\n")
    exporter = contracts()["exporter"]
    forbidden = "\n".join(f"    {m}" for m in exporter["forbidden_modules"])
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_packages =\n    pkg\ninclude_external_packages = True\n"
        "exclude_type_checking_imports = True\n\n"
        f"[importlinter:contract:exporter]\nname = {exporter['name']}\ntype = forbidden\n"
        f"source_modules =\n    pkg.a\n    pkg.typed\nforbidden_modules =\n{forbidden}\n"
    )
    run = lint_imports(tmp_path, "--config", ".importlinter")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Contracts: 0 kept, 1 broken." in run.stdout, run.stdout
    assert "pkg.a is not allowed to import kubernetes" in run.stdout, run.stdout
    chain = [line.strip(" -") for line in run.stdout.splitlines() if " -> " in line]
    assert chain == ["pkg.a -> pkg.b (l.1)", "pkg.b -> pkg.c (l.2)", "pkg.c -> kubernetes (l.1)"], run.stdout
    assert "grpc" not in run.stdout.split("Broken contracts")[1]  # the TYPE_CHECKING import never runs


# -- what each service reaches is what it asks for ----------------------------------------------


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        *PACKAGES, include_external_packages=True, exclude_type_checking_imports=True, cache_dir=None
    )


@pytest.mark.parametrize("package", sorted(DISTRIBUTION_OF))
def test_each_service_reaches_only_libraries_it_asks_for(package: str) -> None:
    g = graph()
    installed = closure(DISTRIBUTION_OF[package])
    providers = importlib.metadata.packages_distributions()
    reached = [
        top
        for top in sorted(m for m in g.modules if g.is_module_squashed(m))
        if top not in sys.stdlib_module_names and g.chain_exists(importer=package, imported=top, as_packages=True)
    ]
    assert reached, f"{package} reaches no library: the check would pass vacuously"
    strays = [
        f"{top}: {' -> '.join(g.find_shortest_chain(package, top, as_packages=True) or ())}"
        for top in reached
        if not {canonicalize_name(d) for d in providers.get(top, [])} & installed
    ]
    assert not strays, f"{package} reaches libraries its pyproject does not ask for:\n" + "\n".join(strays)


def test_installing_the_exporter_pulls_neither_kubernetes_nor_grpc() -> None:
    installed = closure("dcmi-exporter")
    assert {"ascend-common", "fastapi", "uvicorn", "pydantic-settings"} <= installed
    assert not installed & {"kubernetes", "grpcio", "protobuf"}, sorted(installed)
    assert {"kubernetes", "grpcio", "httpx"} <= closure("ascend-device-plugin")


# -- shared libraries -----------------------------------------------------------------------------


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
