# grpcio-tools ships no type information (typed or not, only generate() touches it).
# mypy: disable-error-code="import-untyped"
"""Regenerate the committed kubelet API modules from the .proto files beside this module.

    python -m ascend_common.adapters.kubelet.generate [OUT_DIR]     # default: this package's directory

The generated modules are committed (the services must not need grpcio-tools at run time); a test
regenerates them into a temporary directory and compares bytes, so an edited .proto that was not
regenerated fails CI. The output depends on the grpcio-tools and mypy-protobuf versions pinned in
requirements-dev.txt.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

PACKAGE = "ascend_common.adapters.kubelet"
PACKAGE_DIR = Path(__file__).resolve().parent
# Protoc derives the generated imports from the proto's path relative to the -I root: rooting it
# at the directory that holds `ascend_common/` makes the stubs import each other as
# `ascend_common.adapters.kubelet.xxx_pb2` with no post-processing.
SRC_ROOT = PACKAGE_DIR.parents[len(PACKAGE.split(".")) - 1]
PROTOS = (
    "deviceplugin.proto",
    "podresources.proto",
    "pluginregistration.proto",
    "dra.proto",
    "dra_v1.proto",
    "dra_health.proto",
)
PLUGINS = ("protoc-gen-mypy", "protoc-gen-mypy_grpc")
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")
# Prepended to the generated service stubs (*_pb2_grpc.pyi), which the workspace's ruff exclude
# does not cover. mypy-protobuf writes them against types-grpcio: without those stubs `grpc` is Any,
# which turns their `type: ignore`s into unused ones and their sync/async overloads into
# duplicates; with them none of these errors arises, so the header is harmless either way.
GRPC_STUB_HEADER = (
    '# ruff: noqa\n# fmt: off\n# mypy: disable-error-code="import-untyped,unused-ignore,overload-cannot-match"\n'
)


class GenerateError(RuntimeError):
    pass


def generated_names() -> list[str]:
    """File names of every generated module, sorted: what generate() writes and what is committed."""
    return sorted(Path(proto).stem + suffix for proto in PROTOS for suffix in SUFFIXES)


def _plugin(name: str) -> Path:
    # The mypy-protobuf plugins are console scripts of the interpreter running us (the venv's bin),
    # which need not be on PATH when this runs as `.venv/bin/python -m ...`.
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return beside
    found = shutil.which(name)
    if found is None:
        raise GenerateError(f"{name} not found next to {sys.executable} nor on PATH: install mypy-protobuf")
    return Path(found)


def generate(out_dir: Path) -> list[Path]:
    """Compile the protos into `out_dir` (flat: xxx_pb2.py, xxx_pb2_grpc.py and their .pyi stubs).

    Returns the written paths, sorted. Nothing in `out_dir` is touched if protoc fails.
    """
    from grpc_tools import protoc  # a development dependency only: keep it off the import path of the package

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kubelet-protoc-") as tmp:
        args = [
            "grpc_tools.protoc",
            f"-I{SRC_ROOT}",
            f"--python_out={tmp}",
            f"--grpc_python_out={tmp}",
            f"--mypy_out={tmp}",
            f"--mypy_grpc_out={tmp}",
            *(f"--plugin={name}={_plugin(name)}" for name in PLUGINS),
            *(str(PACKAGE_DIR / proto) for proto in PROTOS),
        ]
        rc = protoc.main(args)
        if rc != 0:
            raise GenerateError(f"protoc failed with exit code {rc}: {' '.join(args)}")
        produced = Path(tmp, *PACKAGE.split("."))
        names = generated_names()
        missing = [name for name in names if not (produced / name).is_file()]
        if missing:
            raise GenerateError(f"protoc did not produce {missing}")
        written = []
        for name in names:
            target = out_dir / name
            data = (produced / name).read_bytes()
            if name.endswith("_grpc.pyi"):
                data = GRPC_STUB_HEADER.encode() + data
            target.write_bytes(data)
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print(f"usage: python -m {PACKAGE}.generate [OUT_DIR]", file=sys.stderr)
        return 2
    out_dir = Path(args[0]) if args else PACKAGE_DIR
    for path in generate(out_dir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
