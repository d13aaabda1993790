"""How to reach this node's kubelet's `/pods` (`--pod-source kubelet`): plain settings, no client
loaded (a service parses them without a cluster)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class KubeletSource:
    """How to reach this node's kubelet: https://<host>:<port>/pods, the bearer token's file, the
    CA its serving certificate is verified with (or, loudly, none)."""

    host: str
    port: int
    token_file: Path
    ca_file: Path | None
    insecure_skip_verify: bool = False
    period_s: float = 5.0
    max_body_bytes: int = 64 << 20

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}/pods"
