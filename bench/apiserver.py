"""The tests' fake API server in a process of its own, driven over a pipe.

In the benchmark process the fake's handler threads share the GIL with the fake kubelet's
event loop, so every watch event and pod patch the fake serves delays the very Allocate call
being timed. In its own process it competes for a core like the real API server would (on
another machine, it would not compete at all), but never for the caller's interpreter.

Protocol: the parent writes one JSON command per line to the child's stdin
(`{"op": "count", "args": {...}}`) and reads one JSON answer per line from its stdout
(`{"ok": <result>}` or `{"error": "<text>"}`); the child's first line is `{"url": ...}`.

    python -m bench.apiserver [--history N] [--resource-api-versions v1,v1beta1] [--device-taints on|off]
        (the child; started by RemoteApiServer)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.support.fake_apiserver import FakeApiServer

ROOT = Path(__file__).resolve().parents[1]
PodSpec = Mapping[str, Any]  # keyword arguments of FakeApiServer.add_pod


class RemoteApiServer:
    """A FakeApiServer running in a child process; the few calls the benchmarks need."""

    def __init__(
        self, *, history: int = 1000, resource_api_versions: tuple[str, ...] = (), device_taints: bool | None = None
    ) -> None:
        versions = ["--resource-api-versions", ",".join(resource_api_versions)] if resource_api_versions else []
        if device_taints is not None:  # FakeApiServer's default otherwise: kept where v1 is served
            versions += ["--device-taints", "on" if device_taints else "off"]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.apiserver", "--history", str(history), *versions],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=dict(os.environ), text=True,
        )  # fmt: skip
        hello = self._read()
        self.url: str = str(hello["url"])

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _read(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fake API server process exited with {self._proc.poll()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _call(self, op: str, **args: Any) -> Any:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self._proc.stdin.flush()
        answer = self._read()
        if "error" in answer:
            raise RuntimeError(f"fake API server {op}: {answer['error']}")
        return answer["ok"]

    def add_node(self, name: str) -> None:
        self._call("add_node", name=name)

    def add_pods(self, pods: Sequence[PodSpec], batch: int = 1000) -> None:
        for start in range(0, len(pods), batch):
            self._call("add_pods", pods=list(pods[start : start + batch]))

    def remove_pod(self, name: str, namespace: str) -> None:
        self._call("remove_pod", name=name, namespace=namespace)

    def put_object(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or overwrite an object (FakeApiServer.put_object); the object as stored."""
        stored: dict[str, Any] = self._call("put_object", kind=kind, obj=obj)
        return stored

    def patches(self, path_prefix: str) -> int:
        return self.count("PATCH", path_prefix)

    def count(self, method: str | None = None, path_prefix: str | None = None, *, watch: bool | None = None) -> int:
        return int(self._call("count", method=method, path_prefix=path_prefix, watch=watch))

    def stop(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(RuntimeError, BrokenPipeError):  # already gone: nothing to stop
                self._call("stop")
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()

    def __enter__(self) -> RemoteApiServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _serve(history: int, resource_api_versions: tuple[str, ...] = (), device_taints: bool | None = None) -> None:
    """The child: answer commands until `stop` or the parent closes the pipe."""
    with FakeApiServer(
        history=history, resource_api_versions=resource_api_versions, device_taints=device_taints
    ) as api:
        print(json.dumps({"url": api.url}), flush=True)
        for line in sys.stdin:
            cmd = json.loads(line)
            op, args = cmd["op"], cmd["args"]
            try:
                result: Any = None
                if op == "add_node":
                    api.add_node(args["name"])
                elif op == "add_pods":
                    for spec in args["pods"]:
                        api.add_pod(**spec)
                elif op == "remove_pod":
                    api.remove("pods", args["name"], args["namespace"])
                elif op == "put_object":
                    result = api.put_object(args["kind"], args["obj"])
                elif op == "count":
                    result = api.count(args["method"], args["path_prefix"], watch=args["watch"])
                elif op == "stop":
                    print(json.dumps({"ok": None}), flush=True)
                    return
                else:
                    raise ValueError(f"unknown op {op!r}")
                print(json.dumps({"ok": result}), flush=True)
            except Exception as exc:  # the parent gets the error; the server keeps serving
                print(json.dumps({"error": repr(exc)}), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--history", type=int, default=1000, help="watch events the fake keeps")
    parser.add_argument(
        "--resource-api-versions", default="", help="resource.k8s.io versions to serve, comma-separated (none)"
    )
    parser.add_argument(
        "--device-taints", choices=("on", "off"), default=None, help="keep ResourceSlice device taints (default: if v1)"
    )
    args = parser.parse_args()
    taints = None if args.device_taints is None else args.device_taints == "on"
    _serve(args.history, tuple(v for v in args.resource_api_versions.split(",") if v), taints)
