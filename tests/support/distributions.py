"""Our distributions' requirements, read from their pyproject.toml, and what installing one brings."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
# Each of our distributions -> its folder (the pyproject.toml there says what it requires).
DISTRIBUTIONS = {
    "ascend-common": ROOT / "libs/common",
    "dcmi-exporter": ROOT / "services/dcmi-exporter",
    "ascend-device-plugin": ROOT / "services/device-plugin",
    "fault-manager": ROOT / "services/fault-manager",
    "ascendctl": ROOT / "services/ascendctl",
}
SERVICES = ("dcmi-exporter", "ascend-device-plugin", "fault-manager")


def requirements_of(distribution: str) -> list[Requirement]:
    """Our distribution's requirements, its extras' as `extra == "..."` markers."""
    project = tomllib.loads((DISTRIBUTIONS[distribution] / "pyproject.toml").read_text())["project"]
    out = [Requirement(r) for r in project.get("dependencies", [])]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        out += [Requirement(f'{r}; extra == "{extra}"') for r in requirements]
    return out


def _wanted(child: Requirement, extras: set[str]) -> bool:
    return child.marker is None or any(child.marker.evaluate({"extra": e}) for e in (extras or {""}))


def third_party(distribution: str) -> set[str]:
    """The third-party distributions ours asks for itself or through our own (with their extras)."""
    out: set[str] = set()
    todo = [Requirement(distribution)]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        if name not in DISTRIBUTIONS:
            out.add(name)
            continue
        todo += [child for child in requirements_of(name) if _wanted(child, req.extras)]
    return out


def closure(distribution: str) -> set[str]:
    """Every distribution installing `distribution` brings, itself included: ours by their pyproject,
    the third-party ones by the metadata of what is installed here."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(distribution)]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        declared = (
            requirements_of(name)
            if name in DISTRIBUTIONS
            else [Requirement(r) for r in importlib.metadata.distribution(name).requires or []]
        )
        todo += [child for child in declared if _wanted(child, set(req.extras))]
    return {name for name, _ in seen}
