"""ascend_common.adapters.hostfs: writes and removals under a host directory never go through a
symlink planted below the operator's root, and the root itself may be one."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from ascend_common.adapters import hostfs
from ascend_common.adapters.hostfs import HostDir, UnsafePath

SECRET = b"secret\n"


def outside_file(tmp_path: Path) -> Path:
    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir(exist_ok=True)
    victim.write_bytes(SECRET)
    victim.chmod(0o600)
    return victim


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# ---- writes: each plants one symlink, and nothing outside the root may change -------------------


def plant_component(root: Path, outside: Path) -> None:
    (root / "a").symlink_to(outside.parent, target_is_directory=True)


def plant_deeper_component(root: Path, outside: Path) -> None:
    (root / "a").mkdir()
    (root / "a" / "b").symlink_to(outside.parent, target_is_directory=True)


def plant_final_name(root: Path, outside: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "victim").symlink_to(outside)


PLANTS: dict[str, tuple[Callable[[Path, Path], None], bool]] = {
    # what is planted -> (how, whether the write is refused rather than done beside the link)
    "first component": (plant_component, True),
    "deeper component": (plant_deeper_component, True),
    # The file name itself: the write replaces the link (a rename never follows it).
    "final name": (plant_final_name, False),
}


@pytest.mark.parametrize("plant", PLANTS)
def test_a_planted_symlink_never_carries_a_write_outside(tmp_path: Path, plant: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    victim = outside_file(tmp_path)
    outside_dir_mode = mode(victim.parent)
    how, refused = PLANTS[plant]
    how(root, victim)
    if refused:
        with pytest.raises(UnsafePath) as caught:
            hostfs.write_file(root, "a/b/victim", b'{"topology": 1}', 0o644)
        assert str(root / "a") in str(caught.value)
    else:
        hostfs.write_file(root, "a/b/victim", b'{"topology": 1}', 0o644)
        written = root / "a" / "b" / "victim"
        assert not written.is_symlink() and written.read_bytes() == b'{"topology": 1}' and mode(written) == 0o644
    assert victim.read_bytes() == SECRET and mode(victim) == 0o600
    assert sorted(p.name for p in victim.parent.iterdir()) == ["victim"]
    assert mode(victim.parent) == outside_dir_mode


def test_the_temporary_name_is_never_a_predictable_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A symlink at every name the old writers used (`.<name>.tmp`) is left alone."""
    victim = outside_file(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    (root / ".f.tmp").symlink_to(victim)
    hostfs.write_file(root, "f", b"new", 0o644)
    assert victim.read_bytes() == SECRET and mode(victim) == 0o600
    assert (root / "f").read_bytes() == b"new"
    assert sorted(p.name for p in root.iterdir()) == [".f.tmp", "f"]  # no temporary file left


def test_the_operators_root_may_be_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "configured").symlink_to(real, target_is_directory=True)
    hostfs.write_file(tmp_path / "configured", "x/y", b"1", 0o640, dir_mode=0o750)
    assert (real / "x" / "y").read_bytes() == b"1"
    assert mode(real / "x" / "y") == 0o640 and mode(real / "x") == 0o750


def test_modes_do_not_depend_on_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        hostfs.write_file(tmp_path, "d/f", b"1", 0o644, dir_mode=0o755)
    finally:
        os.umask(old)
    assert mode(tmp_path / "d") == 0o755 and mode(tmp_path / "d" / "f") == 0o644


@pytest.mark.parametrize("rel", ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a/.", "", "a\0b"])
def test_a_name_that_leaves_its_root_is_refused(tmp_path: Path, rel: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(UnsafePath):
        hostfs.write_file(root, rel, b"1", 0o644)
    with pytest.raises(UnsafePath):
        hostfs.remove_file(root, rel)
    assert list(root.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["root"]


def test_an_existing_file_is_replaced_whole(tmp_path: Path) -> None:
    hostfs.write_file(tmp_path, "f", b"old content", 0o600)
    hostfs.write_file(tmp_path, "f", b"new", 0o644)
    assert (tmp_path / "f").read_bytes() == b"new" and mode(tmp_path / "f") == 0o644


# ---- removals and reads -------------------------------------------------------------------------


def test_removing_through_a_planted_directory_link_is_refused(tmp_path: Path) -> None:
    victim = outside_file(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    (root / "d").symlink_to(victim.parent, target_is_directory=True)
    with pytest.raises(UnsafePath):
        hostfs.remove_file(root, "d/victim")
    assert victim.read_bytes() == SECRET


def test_removing_a_planted_file_link_removes_the_link_only(tmp_path: Path) -> None:
    victim = outside_file(tmp_path)
    (tmp_path / "link").symlink_to(victim)
    assert hostfs.remove_file(tmp_path, "link")
    assert victim.read_bytes() == SECRET and not (tmp_path / "link").is_symlink()


def test_removing_what_is_not_there_is_no_error(tmp_path: Path) -> None:
    assert not hostfs.remove_file(tmp_path, "missing")
    assert not hostfs.remove_file(tmp_path, "missing-dir/missing")


def test_remove_tree_descends_by_descriptor(tmp_path: Path) -> None:
    victim = outside_file(tmp_path)
    tree = tmp_path / "root" / "t"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f").write_text("x")
    (tree / "link-to-dir").symlink_to(victim.parent, target_is_directory=True)
    (tree / "link-to-file").symlink_to(victim)
    with HostDir.root(tmp_path / "root") as d:
        assert d.remove_tree("t")
        assert not d.remove_tree("t")
    assert not tree.exists() and victim.read_bytes() == SECRET


def test_remove_tree_refuses_a_link_in_place_of_the_tree(tmp_path: Path) -> None:
    victim = outside_file(tmp_path)
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "t").symlink_to(victim.parent, target_is_directory=True)
    with HostDir.root(tmp_path / "root") as d, pytest.raises(UnsafePath):
        d.remove_tree("t")
    assert victim.read_bytes() == SECRET


def test_reading_through_a_planted_link_is_refused(tmp_path: Path) -> None:
    victim = outside_file(tmp_path)
    (tmp_path / "f").symlink_to(victim)
    with pytest.raises(UnsafePath):
        hostfs.read_file(tmp_path, "f", 100)
    (tmp_path / "g").write_bytes(b"12345")
    assert hostfs.read_file(tmp_path, "g", 3) == b"1234"  # limit + 1: the caller sees it is too big


def test_create_never_opens_an_existing_name(tmp_path: Path) -> None:
    victim = outside_file(tmp_path)
    (tmp_path / "f").symlink_to(victim)
    with HostDir.root(tmp_path) as d:
        with pytest.raises(FileExistsError):
            d.create("f", b"x", 0o666)
        d.create("g", b"x", 0o666)
    assert victim.read_bytes() == SECRET and mode(victim) == 0o600 and mode(tmp_path / "g") == 0o666
