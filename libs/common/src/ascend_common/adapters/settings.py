"""Settings helpers: one pydantic-settings object per service, from flags and environment.

Precedence: command-line flag > environment variable > default. Flag names are the field
names in kebab case (`--metrics-addr`); environment variables carry the service's prefix
(`DCMI_EXPORTER_METRICS_ADDR`).
"""

from __future__ import annotations

import faulthandler
import signal
import sys
from collections.abc import Sequence
from typing import Annotated, TypeVar

from pydantic import AfterValidator, ValidationError
from pydantic_settings import BaseSettings, CliSettingsSource, SettingsConfigDict

from ascend_common.adapters.logs import setup_logging

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


def prepare(cls: type[S], argv: Sequence[str] | None, prog: str) -> S | None:
    """A service's start: settings from flags and environment, JSON logs, stack dumps on SIGUSR1.

    None (after printing why) when the settings are invalid: the caller exits with 2.
    """
    try:
        settings = load_settings(cls, sys.argv[1:] if argv is None else argv, prog=prog)
    except ValidationError as exc:
        print(f"{prog}: invalid settings:\n{exc}", file=sys.stderr)
        return None
    setup_logging(prog, str(getattr(settings, "log_level", "INFO")))
    # `kill -USR1` dumps every thread's stack: how to see where a process is stuck.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return settings


def _check_host_port(addr: str) -> str:
    parse_host_port(addr)
    return addr


HostPort = Annotated[str, AfterValidator(_check_host_port)]
"""A `HOST:PORT` setting, checked when the settings load."""


def parse_host_port(addr: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets) -> (host, port); ValueError with the reason otherwise."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {addr!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)
