"""Code-size figures of the source trees: modules per package, the largest classes, lines per tree.

    python -m tools.code_figures [ROOT]

ROOT defaults to this checkout; point it at an exported commit (`git archive <rev> | tar -x -C DIR`)
for a before/after table. Generated gRPC modules (*_pb2*.py) are left out.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

TREES = (
    "libs/common/src",
    "services/dcmi-exporter/src",
    "services/device-plugin/src",
    "services/fault-manager/src",
    "services/ascendctl/src",
)


def sources(tree: Path) -> list[Path]:
    return sorted(p for p in tree.rglob("*.py") if "_pb2" not in p.name)


def main(root: Path) -> None:
    print("## modules per package (the .py files directly in it)")
    for name in TREES:
        tree = root / name
        if not tree.is_dir():
            continue
        packages = sorted({p.parent for p in sources(tree)})
        for package in packages:
            count = sum(1 for p in sources(tree) if p.parent == package)
            print(f"{count:4d}  {package.relative_to(root)}")
    print("\n## lines per tree (all lines of its .py files)")
    for name in TREES:
        tree = root / name
        if tree.is_dir():
            lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in sources(tree))
            print(f"{lines:6d}  {name}")
    print("\n## largest classes (lines, methods), five per tree")
    for name in TREES:
        tree = root / name
        if not tree.is_dir():
            continue
        found = []
        for path in sources(tree):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                    methods = sum(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in node.body)
                    found.append((node.end_lineno - node.lineno + 1, methods, f"{path.relative_to(root)}:{node.name}"))
        for lines, methods, where in sorted(found, reverse=True)[:5]:
            print(f"{lines:5d} lines {methods:3d} methods  {where}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
