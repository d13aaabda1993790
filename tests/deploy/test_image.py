"""The image: one install script for both build routes (Dockerfile and ./dev image's debootstrap
chroot), pins that agree with the workspace's, and a docker-archive that runtimes can import."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tarfile
from pathlib import Path

import pytest

from tests.support.distributions import DISTRIBUTIONS, SERVICES, third_party
from tools.image.docker_archive import ImageConfig, from_dockerfile, pack
from tools.image.ref import image_ref

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.lower()] = version
    return pins


def test_image_pins_agree_with_the_workspace() -> None:
    image = _pins(ROOT / "deploy" / "image" / "requirements.txt")
    dev = _pins(ROOT / "requirements-dev.txt")
    assert image, "the image pins its dependencies"
    assert {name: dev.get(name) for name in image} == image


@pytest.mark.parametrize("service", SERVICES)
def test_the_image_pins_what_each_service_asks_for(service: str) -> None:
    # install.sh installs our packages without their dependencies: the pins must hold every library a
    # service names, and those of the ascend-common extras it names.
    pinned = {name.replace("_", "-") for name in _pins(ROOT / "deploy" / "image" / "requirements.txt")}
    assert third_party(service) <= pinned, sorted(third_party(service) - pinned)
    assert f"$SRC/{DISTRIBUTIONS[service].relative_to(ROOT)}" in (ROOT / "deploy/image/install.sh").read_text()


def test_dockerfile_installs_only_through_the_shared_script() -> None:
    runs = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("RUN ")]
    assert runs == ["RUN sh /src/deploy/image/install.sh /src && rm -rf /src"]
    assert os.access(ROOT / "deploy" / "image" / "install.sh", os.X_OK)


def test_both_routes_take_the_image_config_from_the_dockerfile() -> None:
    image = from_dockerfile(DOCKERFILE.read_text(), "t:1")
    assert image.user == "10001"
    (path,) = [e for e in image.env if e.startswith("PATH=")]
    assert path.split("=", 1)[1].split(":")[0] == "/opt/ascend/bin"
    assert image.cmd == ["dcmi-exporter", "--help"]


def test_from_dockerfile_reads_the_final_stage_only() -> None:
    text = 'FROM a AS build\nUSER 5\nENV X=1\nFROM b\nENV PATH=/x:/y\nWORKDIR /w\nENTRYPOINT ["/e"]\n'
    image = from_dockerfile(text, "t:1")
    assert (image.user, image.env, image.entrypoint, image.cmd, image.workdir) == (
        "",
        ["PATH=/x:/y"],
        ["/e"],
        None,
        "/w",
    )


def test_the_base_names_one_image() -> None:
    assert re.fullmatch(r"[a-z0-9.-]+(/[a-z0-9.-]+)*:[\w.-]+", image_ref())


def test_pack_writes_an_importable_docker_archive(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "bin" / "hello").write_text("#!/bin/sh\necho hi\n")
    (rootfs / "bin" / "hello").chmod(0o755)
    for skipped in ("proc", "dev", "tmp"):
        (rootfs / skipped).mkdir()
        (rootfs / skipped / "leftover").write_text("x")
    out = tmp_path / "image.tar"
    image_id = pack(rootfs, out, ImageConfig(tag="example/app:1.0", user="10001", cmd=["/bin/hello"]))

    with tarfile.open(out) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
        (entry,) = manifest
        assert entry["RepoTags"] == ["example/app:1.0"]
        config_bytes = archive.extractfile(entry["Config"]).read()  # type: ignore[union-attr]
        layer_bytes = archive.extractfile(entry["Layers"][0]).read()  # type: ignore[union-attr]
    assert hashlib.sha256(config_bytes).hexdigest() == image_id == entry["Config"].removesuffix(".json")
    config = json.loads(config_bytes)
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer_bytes).hexdigest()}"]
    assert config["config"]["User"] == "10001"
    assert config["config"]["Cmd"] == ["/bin/hello"]
    assert (config["os"], config["architecture"]) == ("linux", "amd64")

    layer = tmp_path / "layer.tar"
    layer.write_bytes(layer_bytes)
    with tarfile.open(layer) as members:
        names = set(members.getnames())
        hello = members.getmember("./bin/hello")
    assert {"./bin/hello", "./proc", "./dev", "./tmp"} <= names
    assert not {"./proc/leftover", "./dev/leftover", "./tmp/leftover"} & names
    assert hello.mode & 0o777 == 0o755


def test_pack_leaves_no_partial_file_on_failure(tmp_path: Path) -> None:
    out = tmp_path / "image.tar"
    with pytest.raises(Exception):  # noqa: B017, PT011 - tar's own error
        pack(tmp_path / "missing", out, ImageConfig(tag="a:b"))
    assert list(tmp_path.iterdir()) == []
