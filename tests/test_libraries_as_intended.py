"""Libraries used as their authors intend them (issue 22), checked on the source (ast):

- in services/ and libs/common/src nothing writes to `sys.modules` (no import-system edits), and
  nothing takes the heap out of the collector's hands (gc.freeze, gc.disable, ...);
- the Kubernetes adapters use the official asyncio client, `kubernetes.aio` (client, watch, config),
  and none of the synchronous one; no Kubernetes call crosses into a thread: no
  `asyncio.to_thread`, `run_in_executor` or `threading` under adapters/kube, nor in the plugin's
  kube bridge.

Each check is also run on a snippet that breaks it, so that a check which cannot fail is caught.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "services", ROOT / "libs/common/src")
KUBE_ADAPTERS = ROOT / "libs/common/src/ascend_common/adapters/kube"
KUBE_CALLERS = (ROOT / "services/device-plugin/src/ascend_device_plugin/kube",)  # the plugin's kube edge
# The adapters that talk to the apiserver, and the part of kubernetes.aio each one uses.
AIO_USE = {
    "client.py": "kubernetes.aio.client",
    "config.py": "kubernetes.aio.config",
    "watch.py": "kubernetes.aio.watch",
}
SYS_MODULES_WRITES = frozenset({"setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__"})
GC_TRICKS = frozenset({"freeze", "unfreeze", "disable", "set_threshold"})
THREAD_HOPS = frozenset({"to_thread", "run_in_executor"})
THREAD_MODULES = ("threading", "_thread", "concurrent.futures")
Check = Callable[[ast.AST], list[int]]


def python_files(*roots: Path) -> Iterator[Path]:
    for root in roots:
        if root.is_file():
            yield root
            continue
        for path in sorted(root.rglob("*.py")):
            if not {".venv", "tests", "__pycache__"} & set(path.relative_to(ROOT).parts):
                yield path


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _is_sys_modules(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "modules"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def _writes_sys_modules(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
        return _is_sys_modules(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return _is_sys_modules(node.func.value) and node.func.attr in SYS_MODULES_WRITES
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr):
        return node.value is not None and _is_sys_modules(node.value)
    if isinstance(node, ast.ImportFrom):
        return node.module == "sys" and any(alias.name == "modules" for alias in node.names)
    return False


def sys_modules_writes(tree: ast.AST) -> list[int]:
    """Lines that write to sys.modules: item assignment or deletion, a mutating method, or an alias
    of it (`from sys import modules`, `m = sys.modules`) through which it could be written unseen."""
    return [node.lineno for node in ast.walk(tree) if _writes_sys_modules(node)]  # type: ignore[attr-defined]


def gc_tricks(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "gc":
            if node.attr in GC_TRICKS:
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "gc":
            lines.append(node.lineno)
    return lines


def _hops_threads(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in THREAD_HOPS
    if isinstance(node, ast.Import):
        return any(alias.name.startswith(THREAD_MODULES) for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return module.startswith(THREAD_MODULES) or any(alias.name in THREAD_HOPS for alias in node.names)
    return False


def thread_hops(tree: ast.AST) -> list[int]:
    """Lines that run something in a thread: to_thread, run_in_executor, or an import of a thread module."""
    return [node.lineno for node in ast.walk(tree) if _hops_threads(node)]  # type: ignore[attr-defined]


def kubernetes_imports(tree: ast.AST) -> list[str]:
    """Every module of the kubernetes package a file imports (`from kubernetes import x` names kubernetes.x)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name.split(".")[0] == "kubernetes"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kubernetes":
            names += [f"{node.module}.{a.name}" if node.module == "kubernetes" else node.module for a in node.names]
    return names


def found(check: Check, roots: tuple[Path, ...]) -> dict[str, list[int]]:
    out = {}
    for path in python_files(*roots):
        lines = check(parse(path))
        if lines:
            out[str(path.relative_to(ROOT))] = lines
    return out


def test_nothing_writes_to_sys_modules() -> None:
    assert found(sys_modules_writes, SOURCES) == {}


def test_no_gc_tricks() -> None:
    assert found(gc_tricks, SOURCES) == {}


def test_no_kubernetes_call_crosses_into_a_thread() -> None:
    assert list(python_files(KUBE_ADAPTERS)), "no kube adapters found: the path moved?"
    assert found(thread_hops, (KUBE_ADAPTERS, *KUBE_CALLERS)) == {}


def test_the_kube_adapters_use_kubernetes_aio_and_nothing_of_the_synchronous_client() -> None:
    used: dict[str, list[str]] = {}
    for path in python_files(KUBE_ADAPTERS, *KUBE_CALLERS):
        used[path.name] = kubernetes_imports(parse(path))
    for name, module in AIO_USE.items():
        assert any(m == module or m.startswith(module + ".") for m in used[name]), f"{name} does not use {module}"
    synchronous = {name: [m for m in mods if not m.startswith("kubernetes.aio")] for name, mods in used.items()}
    assert {name: mods for name, mods in synchronous.items() if mods} == {}


@pytest.mark.parametrize(
    ("check", "snippet"),
    [
        (sys_modules_writes, "import sys\nsys.modules['x'] = None"),
        (sys_modules_writes, "import sys\nsys.modules.setdefault('x', None)"),
        (sys_modules_writes, "import sys\ndel sys.modules['x']"),
        (sys_modules_writes, "import sys\nm = sys.modules"),
        (sys_modules_writes, "from sys import modules"),
        (gc_tricks, "import gc\ngc.freeze()"),
        (gc_tricks, "import gc\ngc.disable()"),
        (thread_hops, "import asyncio\nawait asyncio.to_thread(f)"),
        (thread_hops, "loop.run_in_executor(None, f)"),
        (thread_hops, "import threading"),
        (thread_hops, "from concurrent.futures import ThreadPoolExecutor"),
        (thread_hops, "from asyncio import to_thread"),
    ],
)
def test_each_check_catches_what_it_forbids(check: Check, snippet: str) -> None:
    assert check(ast.parse(snippet)), snippet


def test_reading_sys_modules_is_not_a_write() -> None:
    assert sys_modules_writes(ast.parse("import sys\nx = 'a' in sys.modules\ny = sys.modules.get('a')")) == []


def test_a_synchronous_kubernetes_import_is_caught() -> None:
    tree = ast.parse("from kubernetes import client\nimport kubernetes.watch\nfrom kubernetes.aio import client as c")
    assert kubernetes_imports(tree) == ["kubernetes.client", "kubernetes.watch", "kubernetes.aio"]
