"""Bearer tokens for mutating calls.

The token file holds one token per line followed by its comma-separated scopes
(`<token> reset,vnpu`); blank lines and `#` comments are ignored. A service that calls
the exporter holds a file with its own token first on a line.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class Scope(StrEnum):
    RESET = "reset"
    VNPU = "vnpu"
    SIM = "sim"
    CONTAINERS = "containers"  # the device plugin telling the exporter who holds which chip


class TokenFileError(ValueError):
    pass


@dataclass(frozen=True)
class TokenTable:
    entries: tuple[tuple[str, frozenset[Scope]], ...] = ()

    def scopes_of(self, token: str) -> frozenset[Scope] | None:
        """The token's scopes, or None for an unknown token (compared in constant time)."""
        found: frozenset[Scope] | None = None
        for known, scopes in self.entries:
            if hmac.compare_digest(known.encode(), token.encode()):
                found = scopes
        return found


def parse_token_file(text: str, source: str = "<token file>") -> TokenTable:
    entries: list[tuple[str, frozenset[Scope]]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TokenFileError(f"{source}:{lineno}: expected '<token> <scope>[,<scope>...]'")
        token, scope_text = parts
        if len(token) < 16:
            raise TokenFileError(f"{source}:{lineno}: token shorter than 16 characters")
        try:
            scopes = frozenset(Scope(s) for s in scope_text.split(",") if s)
        except ValueError as exc:
            raise TokenFileError(f"{source}:{lineno}: {exc}; scopes are reset, vnpu, sim, containers") from None
        entries.append((token, scopes))
    return TokenTable(tuple(entries))


def load_token_file(path: Path) -> TokenTable:
    return parse_token_file(path.read_text(), str(path))


def first_token(path: Path) -> str:
    """The caller's own token: the first token in its file."""
    table = load_token_file(path)
    if not table.entries:
        raise TokenFileError(f"{path}: no token")
    return table.entries[0][0]
