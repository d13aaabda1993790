"""Compile the C test double of libdcmi.so and the struct-layout printer.

Used by session-scoped pytest fixtures (tests/cdouble/fixtures.py); `find_compiler()` is None when
the machine has no C compiler, and the fixtures then skip their tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Literal

HERE = Path(__file__).resolve().parent
DOUBLE_SOURCE = HERE / "libdcmi_double.c"
LAYOUT_SOURCE = HERE / "layout.c"
HEADER = HERE / "dcmi_double.h"

Variant = Literal["full", "nosub"]
VARIANT_FLAGS: dict[str, list[str]] = {
    "full": [],
    # An "older driver": no fault subscription, no A3 brother-card call, no multi-die policy.
    "nosub": ["-DDOUBLE_NO_SUBSCRIBE"],
}
WARNINGS = ["-Wall", "-Wextra"]


class BuildError(RuntimeError):
    pass


def find_compiler() -> str | None:
    """$CC if set and found, else cc, else gcc."""
    for candidate in (os.environ.get("CC"), "cc", "gcc"):
        if candidate:
            path = shutil.which(candidate)
            if path:
                return path
    return None


def _compile(args: list[str]) -> None:
    cc = find_compiler()
    if cc is None:
        raise BuildError("no C compiler found (set CC, or install cc/gcc)")
    proc = subprocess.run([cc, *args], capture_output=True, text=True, check=False, timeout=120)
    if proc.returncode != 0:
        raise BuildError(f"{cc} {' '.join(args)} failed:\n{proc.stderr}")


def build_double(out_dir: str | os.PathLike[str], variant: Variant = "full") -> Path:
    """Build libdcmi_double_<variant>.so in out_dir and return its path.

    Each variant is its own file, so each has its own state when both are loaded in one process
    (ctypes/dlopen share one handle, and one state, per path).
    """
    if variant not in VARIANT_FLAGS:
        raise ValueError(f"unknown variant {variant!r}")
    out = Path(out_dir) / f"libdcmi_double_{variant}.so"
    out.parent.mkdir(parents=True, exist_ok=True)
    _compile(
        [
            "-shared",
            "-fPIC",
            "-pthread",
            "-O1",
            "-g",
            *WARNINGS,
            *VARIANT_FLAGS[variant],
            f"-I{HERE}",
            "-o",
            str(out),
            str(DOUBLE_SOURCE),
        ]
    )
    return out


def build_layout(out_dir: str | os.PathLike[str]) -> Path:
    """Build the `layout` executable (prints sizeof/offsetof of every bound struct)."""
    out = Path(out_dir) / "dcmi_layout"
    out.parent.mkdir(parents=True, exist_ok=True)
    _compile([*WARNINGS, f"-I{HERE}", "-o", str(out), str(LAYOUT_SOURCE)])
    return out


def read_layout(binary: str | os.PathLike[str]) -> dict[str, int]:
    """Run the layout binary: {"struct": sizeof, "struct.field": offsetof}."""
    proc = subprocess.run([os.fspath(binary)], capture_output=True, text=True, check=True, timeout=30)
    facts: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        name, value = line.split()
        facts[name] = int(value)
    return facts


LINGQU_SOURCE = HERE / "liblingqu_double.c"


def build_lingqu(out_dir: str | os.PathLike[str]) -> Path:
    """Build liblingqu_double.so (the C double of the A3 switch library) in out_dir and return its path."""
    out = Path(out_dir) / "liblingqu_double.so"
    out.parent.mkdir(parents=True, exist_ok=True)
    _compile(["-shared", "-fPIC", "-pthread", "-O1", "-g", *WARNINGS, "-o", str(out), str(LINGQU_SOURCE)])
    return out
