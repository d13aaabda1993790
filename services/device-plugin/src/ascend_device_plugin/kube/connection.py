"""The ApiClient every piece of the kube edge calls through, built when the plugin starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ascend_common.adapters.kube.client import ApiClient
from ascend_common.adapters.kube.config import build_api_client


@dataclass
class ApiConnection:
    kubeconfig: str | Path | None = None
    # None until open() builds it from `kubeconfig` (the asyncio client's loader is a coroutine).
    api: ApiClient | None = None

    async def open(self) -> ApiClient:
        if self.api is None:
            self.api = await build_api_client(kubeconfig=self.kubeconfig)
        return self.api

    @property
    def client(self) -> ApiClient:
        """The ApiClient, for the calls made once open() has built it."""
        if self.api is None:
            raise RuntimeError("the kube edge is not started")
        return self.api

    async def close(self) -> None:
        if self.api is not None:
            await self.api.close()  # type: ignore[no-untyped-call]  # its aiohttp session
