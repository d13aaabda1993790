"""Settings helpers: one pydantic-settings object per service, from flags and environment.

Precedence: command-line flag > environment variable > default. Flag names are the field
names in kebab case (`--metrics-addr`); environment variables carry the service's prefix
(`DCMI_EXPORTER_METRICS_ADDR`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from pydantic_settings import BaseSettings, CliSettingsSource, SettingsConfigDict

S = TypeVar("S", bound=BaseSettings)


def service_config(env_prefix: str) -> SettingsConfigDict:
    return SettingsConfigDict(env_prefix=env_prefix, extra="forbid", validate_default=True)


def load_settings(cls: type[S], argv: Sequence[str] | None, prog: str) -> S:
    """Parse `argv` (None: no flags, environment only) into the service's settings.

    Booleans take a value (`--preset-virtual-device false`), as the reference's flags do,
    unless a field is marked `CliImplicitFlag` (a bare `--volcano-type`).
    """
    if argv is None:
        return cls()
    cli: CliSettingsSource[S] = CliSettingsSource(
        cls, cli_prog_name=prog, cli_kebab_case=True, cli_implicit_flags=False, cli_exit_on_error=True
    )
    return cls(_cli_settings_source=cli(args=list(argv)))


def parse_host_port(addr: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets) -> (host, port); ValueError with the reason otherwise."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {addr!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)
