"""The kubelet's own DRA manager (tests/dra_harness/main.go) as a process the tests talk to.

main.go runs k8s.io/kubernetes pkg/kubelet/cm/dra (v1.32) behind pkg/kubelet/pluginmanager, as
vendored by the kubeedge/kubeedge tree bench/admission.py documents (ASCEND_BENCH_KUBEEDGE,
default ~/.cache/ascend-node-stack/kubeedge). It is built there like the admission harness
(bench.admission.build_in_tree: <tree>/cmd/kubelet_dra/, the tree's vendor directory, offline,
the binary under ~/.cache/ascend-node-stack/kubelet_dra/). Without the tree or a Go the tests skip
with the reason; CI cannot bring the tree and runs the fake DRA kubelet instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

from bench.admission import CACHE, build_in_tree, kubeedge_tree

SOURCE = Path(__file__).with_name("main.go")
BINARY = CACHE / "kubelet_dra" / "kubelet_dra"
DRA_MANAGER = Path("vendor/k8s.io/kubernetes/pkg/kubelet/cm/dra/manager.go")
ANSWER_S = 60.0  # a Prepare waits for the driver's answer; the manager's own gRPC timeout is 45 s
REGISTRATION = ("validate", "register", "deregister")

JsonObj = dict[str, Any]


def harness_binary() -> tuple[Path | None, str]:
    """The harness built from SOURCE in the kubeedge tree, or None and why not (build failures raise)."""
    tree, why = kubeedge_tree()
    if tree is None:
        return None, why
    if not (tree / DRA_MANAGER).is_file():
        return None, f"the kubeedge tree at {tree} vendors no kubelet DRA manager ({DRA_MANAGER})"
    return build_in_tree(tree, SOURCE, BINARY)


class RealDraKubelet:
    """One harness process: registration events collected as they come, commands answered in order."""

    def __init__(self, binary: Path, registry_dir: Path, state_dir: Path, log: Path, node: str = "node-a") -> None:
        self.binary = binary
        self.registry_dir = registry_dir
        self.state_dir = state_dir
        self.log = log
        self.node = node
        self.registrations: list[JsonObj] = []  # the plugin manager's calls of the DRA handler, in order
        self._answers: asyncio.Queue[JsonObj | None] = asyncio.Queue()
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as stderr:
            self._proc = await asyncio.create_subprocess_exec(
                str(self.binary), "-registry", str(self.registry_dir), "-state", str(self.state_dir),
                "-node", self.node, "-v", "6",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            )  # fmt: skip
        self._reader = asyncio.create_task(self._read(), name="kubelet-dra-harness-reader")
        first = await self._answer("ready")
        assert first["event"] == "ready"

    async def stop(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.terminate()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await self._proc.wait()
            if self._proc.returncode is None:
                self._proc.kill()
                await self._proc.wait()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    def events(self, event: str, driver: str) -> list[JsonObj]:
        return [e for e in self.registrations if e["event"] == event and e.get("driver") == driver]

    async def claim(self, claim: JsonObj) -> JsonObj:
        return await self._call({"op": "claim", "claim": claim}, "claim")

    async def prepare(self, pod: JsonObj) -> JsonObj:
        return await self._call({"op": "prepare", "pod": pod}, "prepare")

    async def unprepare(self, pod: JsonObj) -> JsonObj:
        return await self._call({"op": "unprepare", "pod": pod}, "unprepare")

    async def actions(self) -> list[dict[str, str]]:
        """Every call the manager made to its (fake) clientset, in order."""
        answer = await self._call({"op": "actions"}, "actions")
        return list(answer["actions"])

    async def _call(self, command: JsonObj, event: str) -> JsonObj:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(command).encode() + b"\n")
        await self._proc.stdin.drain()
        return await self._answer(event)

    async def _answer(self, event: str) -> JsonObj:
        async with asyncio.timeout(ANSWER_S):
            answer = await self._answers.get()
        if answer is None:
            tail = (await asyncio.to_thread(self.log.read_text))[-3000:]
            raise RuntimeError(f"the DRA manager harness exited before '{event}': {tail}")
        if answer["event"] != event:
            raise RuntimeError(f"the DRA manager harness said {answer}, expected '{event}'")
        return answer

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while raw := await self._proc.stdout.readline():
            message: JsonObj = json.loads(raw)
            if message["event"] in REGISTRATION:
                self.registrations.append(message)
            else:
                await self._answers.put(message)
        await self._answers.put(None)
