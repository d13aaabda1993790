"""The image reference the DaemonSets run: what `./dev image` builds and tags.

The base DaemonSets name it and no overlay overrides it (tests/deploy checks the rendered
overlays against this), so the tag a deployment pulls is always the one just built.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "kustomize" / "base"


def image_ref(base: Path = BASE) -> str:
    refs = {
        container["image"]
        for path in sorted(base.glob("daemonset-*.yaml"))
        for container in yaml.safe_load(path.read_text())["spec"]["template"]["spec"]["containers"]
    }
    if len(refs) != 1:
        raise ValueError(f"the base DaemonSets name {len(refs)} images, want one: {sorted(refs)}")
    (ref,) = refs
    return str(ref)


if __name__ == "__main__":
    print(image_ref())
