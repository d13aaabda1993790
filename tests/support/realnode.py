"""What the real-node tiers share (the cluster tier and compose under podman): the image they run
and the figures they measure, kept for `python -m bench.realnode` to put in docs/benchmarks.md."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / ".state" / "real-node" / "figures.json"


def image_archive() -> Path:
    """`./dev image`: the docker-archive of the image the overlays name, built when its inputs
    changed (else the one on disk, at once)."""
    done = subprocess.run(
        [str(ROOT / "tools" / "image" / "build.sh")], capture_output=True, text=True, timeout=1800, check=False
    )
    assert done.returncode == 0, f"./dev image failed:\n{done.stderr[-4000:]}"
    return Path(done.stdout.strip().splitlines()[-1])


def record(name: str, value: Any) -> None:
    """Keep one measured figure (merged into FIGURES, with when it was taken)."""
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
    current[name] = {"value": value, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    FIGURES.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
