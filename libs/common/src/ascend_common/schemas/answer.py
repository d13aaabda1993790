"""The base of every answer a service's local API gives (the exporter's, the fault-manager's)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Answer(BaseModel):
    # Immutable once read. A consumer ignores fields it does not know, as Go's encoding/json does:
    # during a rolling update a newer exporter or fault-manager may answer an older plugin.
    model_config = ConfigDict(frozen=True, extra="ignore")
