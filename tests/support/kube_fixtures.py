"""The fixtures of the kube adapters' tests, registered for every test by the root conftest.py: a
stateful fake API server (`fake`), and an asyncio client of the official library pointed at it
(`api`, closed after the test, so no aiohttp session is left open). A module that needs objects in
the server first defines its own `fake`, and `api` follows it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from ascend_common.adapters.kube.client import ApiClient
from ascend_common.adapters.kube.config import build_api_client

from tests.support.fake_apiserver import FakeApiServer


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


@pytest.fixture
async def api(fake: FakeApiServer) -> AsyncIterator[ApiClient]:
    client = await build_api_client(url=fake.url)
    yield client
    await client.close()  # type: ignore[no-untyped-call]
