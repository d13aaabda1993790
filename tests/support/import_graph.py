"""What a module loads, through every chain of imports, read from the source (ast) without running it.

An edge is any import a module can execute: at module level or inside a function, `import a.b`
(which runs a and a.b), `from a import b` (a, and a.b when that is a module), relative imports
and `importlib.import_module("...")` with a literal name. Imports under `if TYPE_CHECKING:` never
run and are left out. Our own packages are followed; anything else (the standard library,
third-party libraries) is a leaf, kept by its full dotted name.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path


class ImportGraph:
    def __init__(self, packages: Mapping[str, Path]) -> None:
        """`packages`: each of our top-level package names -> its directory."""
        self.files: dict[str, Path] = {}
        for name, folder in packages.items():
            for path in sorted(folder.rglob("*.py")):
                parts = [name, *path.relative_to(folder).with_suffix("").parts]
                if parts[-1] == "__init__":
                    parts.pop()
                self.files[".".join(parts)] = path
        self._reach = cache(self._reach_uncached)

    def modules(self, package: str) -> list[str]:
        """Our modules in `package` (itself included), sorted."""
        return sorted(m for m in self.files if m == package or m.startswith(package + "."))

    def is_ours(self, module: str) -> bool:
        return module in self.files

    def imports(self, module: str) -> set[str]:
        """Every module `module` can import directly: ours by name, the others by their dotted name."""
        path = self.files[module]
        is_package = path.name == "__init__.py"
        found: set[str] = set()
        for node in _executed(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found |= self._with_parents(alias.name)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_package, node.module, node.level)
                found |= self._with_parents(base)
                for alias in node.names:
                    if self.is_ours(f"{base}.{alias.name}"):
                        found.add(f"{base}.{alias.name}")
            elif isinstance(node, ast.Call) and _is_import_module(node):
                found |= self._with_parents(node.args[0].value)  # type: ignore[attr-defined]
        found.discard(module)
        return found

    def reach(self, module: str) -> dict[str, tuple[str, ...]]:
        """Every module `module` loads through any chain -> one such chain (from `module`, to it)."""
        return self._reach(module)

    def _reach_uncached(self, module: str) -> dict[str, tuple[str, ...]]:
        chains: dict[str, tuple[str, ...]] = {module: (module,)}
        todo = [module]
        while todo:
            current = todo.pop()
            for imported in sorted(self.imports(current)):
                if imported in chains:
                    continue
                chains[imported] = (*chains[current], imported)
                if self.is_ours(imported):
                    todo.append(imported)
        del chains[module]
        return chains

    def reached(self, modules: Iterable[str], *, matching: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """Of everything `modules` reach, what is one of `matching` or inside one (dotted prefix) -> a chain."""
        wanted = tuple(matching)
        out: dict[str, tuple[str, ...]] = {}
        for module in modules:
            for target, chain in self.reach(module).items():
                if any(target == w or target.startswith(w + ".") for w in wanted):
                    out.setdefault(target, chain)
        return out

    def third_party(self, modules: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """The top-level names outside our packages and the standard library that `modules` reach -> a chain."""
        ours = {m.split(".")[0] for m in self.files}
        out: dict[str, tuple[str, ...]] = {}
        for module in modules:
            for target, chain in self.reach(module).items():
                top = target.split(".")[0]
                if top not in ours and top not in sys.stdlib_module_names:
                    out.setdefault(top, chain)
        return out

    def _with_parents(self, dotted: str) -> set[str]:
        # Importing a.b.c runs a/__init__ and a/b/__init__ first; of another library only the name matters.
        parts = dotted.split(".")
        if not self.is_ours(parts[0]):
            return {dotted}
        return {".".join(parts[:n]) for n in range(1, len(parts) + 1) if self.is_ours(".".join(parts[:n]))}


def chain_text(chain: Iterable[str]) -> str:
    return " -> ".join(chain)


def _absolute(module: str, is_package: bool, name: str | None, level: int) -> str:
    if level == 0:
        return name or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, *([name] if name else [])])


def _is_import_module(node: ast.Call) -> bool:
    func = node.func
    named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )
    return named and bool(node.args) and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)


def _executed(tree: ast.AST) -> list[ast.AST]:
    """Every node except the bodies of `if TYPE_CHECKING:` blocks."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )
