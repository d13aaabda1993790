"""Running the Go programs that print the golden vectors (Go's encoding/json is the reference's)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

GO = shutil.which("go")  # None: the committed vectors are checked, the programs not re-run


def _env(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "GOTOOLCHAIN": "local",  # never download another toolchain
        "GO111MODULE": "off",  # a single-file program with the standard library only
        "GOFLAGS": "",
        "GOCACHE": str(workdir / "cache"),
        "GOPATH": str(workdir / "gopath"),
    }


def go_version(workdir: Path) -> tuple[int, int]:
    """The (major, minor) of the `go` on PATH."""
    assert GO is not None
    out = subprocess.run([GO, "version"], capture_output=True, text=True, env=_env(workdir), check=True, timeout=60)
    match = re.search(r"go(\d+)\.(\d+)", out.stdout)
    assert match is not None, out.stdout
    return int(match[1]), int(match[2])


def run_go(program: Path, workdir: Path) -> str:
    """What `go run program` prints, built in `workdir`."""
    assert GO is not None
    result = subprocess.run(
        [GO, "run", str(program)], capture_output=True, text=True, env=_env(workdir), cwd=workdir, check=True,
        timeout=600,
    )  # fmt: skip
    return result.stdout
