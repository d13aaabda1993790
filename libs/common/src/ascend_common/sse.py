"""Server-sent events: encoding for servers, incremental parsing for clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SseMessage:
    event: str
    data: str
    id: str | None = None


def encode(event: str, data: str, event_id: str | None = None) -> bytes:
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"event: {event}")
    lines.extend(f"data: {part}" for part in data.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


async def parse(chunks: AsyncIterator[str]) -> AsyncIterator[SseMessage]:
    """Messages from a text stream (e.g. httpx `aiter_lines` joined back as lines)."""
    event, data, msg_id = "message", list[str](), None
    async for line in chunks:
        line = line.rstrip("\r\n")
        if not line:
            if data:
                yield SseMessage(event, "\n".join(data), msg_id)
            event, data, msg_id = "message", list[str](), None
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            msg_id = value
