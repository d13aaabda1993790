"""Pack a root filesystem directory as a one-layer docker-archive (the `docker save` layout:
manifest.json, an image config and a layer tar), which `ctr images import` and `podman load`
read. Used where no image builder runs: for the stack's image (`./dev image`) and for the
cluster tier's pause image.

    python -m tools.image.docker_archive ROOTFS OUT.tar --tag NAME:TAG [--dockerfile FILE]
        [--user U] [--env K=V ...] [--entrypoint JSON] [--cmd JSON] [--workdir DIR]

--dockerfile takes USER, ENV, CMD, ENTRYPOINT and WORKDIR from a Dockerfile's final stage
(exec-form CMD/ENTRYPOINT, `ENV K=V` lines), so both build routes give the same image config.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

# What a container runtime mounts over or must not find from the build: never in the layer.
EXCLUDED = ("./proc/*", "./sys/*", "./dev/*", "./run/*", "./tmp/*", "./var/cache/apt/*", "./var/lib/apt/lists/*")

DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class ImageConfig:
    tag: str
    user: str = ""
    env: list[str] = field(default_factory=lambda: [DEFAULT_PATH])
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    workdir: str = "/"


def from_dockerfile(text: str, tag: str) -> ImageConfig:
    """The run-time settings of a Dockerfile's final stage."""
    stage = text.split("\nFROM ")[-1]
    fields: dict[str, object] = {"tag": tag}
    env = [DEFAULT_PATH]
    for raw in stage.splitlines():
        instruction, _, value = raw.strip().partition(" ")
        value = value.strip()
        if instruction == "USER":
            fields["user"] = value
        elif instruction == "WORKDIR":
            fields["workdir"] = value
        elif instruction in ("CMD", "ENTRYPOINT"):
            fields[instruction.lower()] = json.loads(value)
        elif instruction == "ENV":
            name = value.partition("=")[0]
            env = [e for e in env if e.partition("=")[0] != name] + [value]
    return ImageConfig(env=env, **fields)  # type: ignore[arg-type]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def config_json(image: ImageConfig, diff_id: str, created: str) -> bytes:
    """The image config (OCI image spec / docker v1.2 config) of a one-layer image."""
    config: dict[str, object] = {"Env": image.env, "WorkingDir": image.workdir}
    if image.user:
        config["User"] = image.user
    if image.entrypoint is not None:
        config["Entrypoint"] = image.entrypoint
    if image.cmd is not None:
        config["Cmd"] = image.cmd
    document = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": created, "created_by": "tools.image.docker_archive"}],
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def pack(rootfs: Path, out: Path, image: ImageConfig) -> str:
    """Write the archive; return the image id (the config's sha256)."""
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        layer = Path(scratch) / "layer.tar"
        excludes = [f"--exclude={pattern}" for pattern in EXCLUDED]
        # GNU tar keeps owners, modes, devices, hard links and xattrs as a runtime expects them.
        subprocess.run(
            ["tar", "--numeric-owner", "--xattrs", "--sort=name", *excludes, "-C", str(rootfs), "-cf", str(layer), "."],
            check=True,
        )
        diff_id = _sha256(layer)
        created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        config = config_json(image, diff_id, created)
        image_id = hashlib.sha256(config).hexdigest()
        manifest = [{"Config": f"{image_id}.json", "RepoTags": [image.tag], "Layers": [f"{diff_id}/layer.tar"]}]
        tmp_out = out.with_suffix(".partial")
        with tarfile.open(tmp_out, "w") as archive:
            _add_bytes(archive, f"{image_id}.json", config)
            archive.add(layer, arcname=f"{diff_id}/layer.tar")
            _add_bytes(archive, "manifest.json", json.dumps(manifest).encode())
            _add_bytes(archive, "repositories", json.dumps(_repositories(image.tag, diff_id)).encode())
        tmp_out.replace(out)
    return image_id


def _repositories(tag: str, top_layer: str) -> dict[str, dict[str, str]]:
    name, _, version = tag.rpartition(":")
    return {name: {version: top_layer}}


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rootfs", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--dockerfile", type=Path, default=None)
    parser.add_argument("--user", default="")
    parser.add_argument("--env", action="append", default=None)
    parser.add_argument("--entrypoint", type=json.loads, default=None)
    parser.add_argument("--cmd", type=json.loads, default=None)
    parser.add_argument("--workdir", default="/")
    args = parser.parse_args(argv)
    if args.dockerfile is not None:
        image = from_dockerfile(args.dockerfile.read_text(), args.tag)
    else:
        image = ImageConfig(
            tag=args.tag, user=args.user, entrypoint=args.entrypoint, cmd=args.cmd, workdir=args.workdir
        )
    if args.env:
        image = ImageConfig(**{**image.__dict__, "env": [*image.env, *args.env]})
    print(pack(args.rootfs, args.out, image))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
