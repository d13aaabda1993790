"""Writes docs/configuration.md from the services' pydantic-settings classes.

    .venv/bin/python -m tools.config_doc > docs/configuration.md

One table per service: every field of its settings class as the flag (`--kebab-case`), the
environment variable (prefix + UPPER_CASE), the type and bounds, the default and the
description, all read from `model_fields` and `model_config`, so the page cannot drift from the
code as long as it is regenerated. A development tool: no service imports it.
"""

from __future__ import annotations

import enum
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import annotated_types
from ascend_device_plugin.settings import PluginSettings
from dcmi_exporter.settings import ExporterSettings
from fault_manager.settings import FaultManagerSettings
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings


@dataclass(frozen=True)
class Service:
    command: str
    settings: type[BaseSettings]
    source: str


SERVICES = [
    Service("dcmi-exporter", ExporterSettings, "services/dcmi-exporter/src/dcmi_exporter/settings.py"),
    Service("ascend-device-plugin", PluginSettings, "services/device-plugin/src/ascend_device_plugin/settings.py"),
    Service("fault-manager", FaultManagerSettings, "services/fault-manager/src/fault_manager/settings.py"),
]


def is_implicit_flag(info: FieldInfo) -> bool:
    """A `CliImplicitFlag[bool]` field: a bare `--flag` sets it (other booleans take a value)."""
    return any(getattr(m, "__name__", "") == "_CliImplicitFlag" for m in info.metadata)


def type_name(annotation: Any) -> str:
    if annotation is None or annotation is type(None):
        return "none"
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        inner = " \\| ".join(type_name(a) for a in args)
        return f"{inner} (optional)" if len(args) < len(typing.get_args(annotation)) else inner
    if isinstance(annotation, type):
        if issubclass(annotation, Path):
            return "path"
        if issubclass(annotation, enum.Enum):
            return " \\| ".join(f"`{m.value}`" for m in annotation)
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


def bounds(info: FieldInfo) -> str:
    parts = []
    for m in info.metadata:
        if isinstance(m, annotated_types.Gt):
            parts.append(f"> {m.gt}")
        elif isinstance(m, annotated_types.Ge):
            parts.append(f">= {m.ge}")
        elif isinstance(m, annotated_types.Lt):
            parts.append(f"< {m.lt}")
        elif isinstance(m, annotated_types.Le):
            parts.append(f"<= {m.le}")
        elif isinstance(m, annotated_types.MaxLen):
            parts.append(f"at most {m.max_length} characters")
    return ", ".join(parts)


def default_text(info: FieldInfo) -> str:
    if info.is_required():
        return "(required)"
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, enum.Enum):
        return f"`{value.value}`"
    if value == "":
        return '`""`'
    return f"`{value}`"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def service_section(service: Service) -> list[str]:
    prefix = str(service.settings.model_config.get("env_prefix", ""))
    lines = [
        f"## {service.command}",
        "",
        f"`{service.settings.__name__}` in `{service.source}`; environment prefix `{prefix}`.",
        "",
        "| flag | environment variable | type | default | description |",
        "|---|---|---|---|---|",
    ]
    for name, info in service.settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        kind = type_name(info.annotation)
        if is_implicit_flag(info):
            kind += " (bare flag)"
        limits = bounds(info)
        if limits:
            kind += f"; {limits}"
        description = cell(info.description or "")
        lines.append(f"| `{flag}` | `{prefix}{name.upper()}` | {kind} | {default_text(info)} | {description} |")
    return lines


def render() -> str:
    lines = [
        "# Configuration",
        "",
        "Generated from the services' pydantic-settings classes by `tools/config_doc.py`:",
        "",
        "    .venv/bin/python -m tools.config_doc > docs/configuration.md",
        "",
        "Do not edit by hand; change the settings class and regenerate. Every setting is a flag and an",
        "environment variable; precedence is flag > environment variable > default. Flags are the field",
        "names in kebab case; booleans take a value (`--preset-virtual-device false`) except the ones",
        "marked *bare flag*, which are set by the flag alone (`--volcano-type`) and cleared by",
        "`--no-<flag>`. An optional setting takes `null` on the command line for none. An unknown flag",
        "or a value outside its bounds stops the service at start-up with exit code 2; an unknown",
        "environment variable is ignored. `<command> --help` prints the flags with their defaults.",
        "",
    ]
    for service in SERVICES:
        lines += service_section(service)
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render())
