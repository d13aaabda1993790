"""DirWatch: woken by the names it watches, not by the kubelet's checkpoint beside them."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from ascend_device_plugin.kubelet.dirwatch import EVENT, IN_Q_OVERFLOW, DirWatch, names_of

IN_CREATE = 0x100


def _event(name: bytes, mask: int = IN_CREATE, padded_to: int = 16) -> bytes:
    field = name.ljust(padded_to, b"\0") if name else b""
    return EVENT.pack(1, mask, 0, len(field)) + field


def test_names_of_reads_each_event_and_its_padded_name() -> None:
    events = _event(b"kubelet.sock") + _event(b".kubelet_internal_checkpoint123", padded_to=32)
    assert names_of(events) == ["kubelet.sock", ".kubelet_internal_checkpoint123"]
    assert names_of(b"") == []


def test_names_of_says_none_after_an_overflow() -> None:
    assert names_of(_event(b"a.sock") + _event(b"", mask=IN_Q_OVERFLOW)) is None


async def _woken(watch: DirWatch, within: float) -> bool:
    started = time.monotonic()
    await watch.wait(within)
    return time.monotonic() - started < within * 0.9


def test_only_wanted_names_wake_the_watch(tmp_path: Path) -> None:
    async def scenario() -> None:
        watch = DirWatch(tmp_path, wanted=lambda name: name.endswith(".sock"))
        assert watch.start()
        try:
            # What the kubelet's checkpoint manager does on every admission: a temporary file renamed.
            (tmp_path / ".kubelet_internal_checkpoint1").write_text("{}")
            os.rename(tmp_path / ".kubelet_internal_checkpoint1", tmp_path / "kubelet_internal_checkpoint")
            assert not await _woken(watch, 0.3)
            (tmp_path / "kubelet.sock").touch()
            assert await _woken(watch, 5.0)
            (tmp_path / "kubelet.sock").unlink()
            assert await _woken(watch, 5.0)
        finally:
            watch.stop()

    asyncio.run(scenario())


def test_without_a_filter_every_name_wakes_the_watch(tmp_path: Path) -> None:
    async def scenario() -> None:
        watch = DirWatch(tmp_path)
        assert watch.start()
        try:
            (tmp_path / "kubelet_internal_checkpoint").write_text("{}")
            assert await _woken(watch, 5.0)
        finally:
            watch.stop()

    asyncio.run(scenario())
