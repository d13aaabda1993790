"""Where the fault policy comes from, and how a new one is adopted.

Offline: the packaged reference tables (or --policy-dir), replaceable through `PUT /v1/policy`.
With a cluster: the ConfigMap `kube-system/mindx-dl-fault-config` when present (watched by name:
the watch's copy is read, and only a change wakes the keeper; polled every PollInterval only while
no watch has listed it), else the packaged tables; `PUT /v1/policy` then answers 409. A policy is
validated whole before use; a bad one is rejected with its reason and the last good one stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ascend_common.adapters.kube.configmaps import ConfigMaps, ConfigMapState, FollowedConfigMap, WatchUnavailable
from ascend_common.faults import (
    FaultPolicyError,
    default_fault_code_table,
    default_fault_customization,
    default_switch_fault_table,
    validate_policy_bundle,
)

from fault_manager.policy.engine import Policy
from fault_manager.store import Store, in_store_thread

log = logging.getLogger(__name__)
POLICY_CONFIGMAP = "mindx-dl-fault-config"
NAMESPACE = "kube-system"
FILES = ("faultCode.json", "faultCustomization.json", "SwitchFaultCode.json")
POLL_RANGE = (30, 3600)
FIRST_LIST_S = 10.0  # how long a watch may take to list before the keeper reads the ConfigMap itself


@dataclass(frozen=True)
class PolicyStatus:
    source: str  # packaged | policy-dir | configmap | api
    digest: str
    last_error: str | None = None


def read_policy_dir(directory: Path | None) -> dict[str, str]:
    """The policy files a directory holds (none given: {}, the packaged reference tables)."""
    if directory is None:
        return {}
    return {name: (directory / name).read_text() for name in FILES if (directory / name).exists()}


def digest_of(files: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(sorted(files.items())), separators=(",", ":")).encode()).hexdigest()


def build(files: Mapping[str, str]) -> Policy:
    """The policy of the given files (packaged tables for the ones not given); FaultPolicyError if bad."""
    unknown = sorted(set(files) - set(FILES) - {"PollInterval"})
    if unknown:
        raise FaultPolicyError(f"unknown policy file {unknown[0]!r}; expected {', '.join(FILES)}", key=unknown[0])
    bundle = validate_policy_bundle(files.get(FILES[0]), files.get(FILES[1]), files.get(FILES[2]))
    return Policy(
        bundle.fault_code or default_fault_code_table(),
        bundle.customization or default_fault_customization(),
        bundle.switch or default_switch_fault_table(),
    )


def poll_interval(files: Mapping[str, str], default: float) -> float:
    raw = files.get("PollInterval")
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        return default
    return float(min(max(value, POLL_RANGE[0]), POLL_RANGE[1]))


class PolicyKeeper:
    def __init__(self, store: Store, adopt: Callable[[Policy], Awaitable[None]], source: str) -> None:
        self.store = store
        self.adopt = adopt
        self.status = PolicyStatus(source, "")

    async def offer(self, files: Mapping[str, str], source: str) -> PolicyStatus:
        """Validate and adopt `files`; keep the last good policy when they are bad."""
        digest = digest_of(files)
        if digest == self.status.digest and source == self.status.source:
            return self.status
        try:
            policy = build(files)
        except FaultPolicyError as exc:
            log.error("fault policy rejected; keeping the last good one", extra={"source": source, "error": str(exc)})
            await in_store_thread(self.store.policies.save, source, digest, json.dumps(dict(files)), False, str(exc))
            self.status = PolicyStatus(self.status.source, self.status.digest, str(exc))
            raise
        await self.adopt(policy)
        await in_store_thread(self.store.policies.save, source, digest, json.dumps(dict(files)), True, None)
        self.status = PolicyStatus(source, digest, None)
        log.info("fault policy adopted", extra={"source": source, "digest": digest[:12]})
        return self.status

    async def follow_configmap(
        self,
        configmaps: ConfigMaps,
        default_poll: float,
        base: Mapping[str, str],
        base_source: str,
        watched: FollowedConfigMap | None = None,
    ) -> None:
        """Adopt the policy ConfigMap as it changes; without it, the base policy (--policy-dir or packaged).

        `watched` (the ConfigMap's own watch) says when it changes: nothing is read on a timer.
        Without one, or while it has not listed, the ConfigMap is read every PollInterval.
        """
        if watched is None:
            await self._poll_configmap(configmaps, default_poll, base, base_source)
            return
        changed = asyncio.Event()
        watched.on_change.append(changed.set)
        watched.start()
        try:
            await watched.wait_synced(FIRST_LIST_S)
            interval = default_poll
            while True:
                changed.clear()
                try:
                    current = watched.state() if watched.synced else await configmaps.get(NAMESPACE, POLICY_CONFIGMAP)
                    interval = await self._offer_configmap(current, default_poll, base, base_source)
                except Exception as exc:  # the API may be down: keep the policy we have
                    log.warning("cannot read the fault policy ConfigMap", extra={"error": str(exc)})
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(None if watched.synced else interval):
                        await changed.wait()
        finally:
            await watched.stop()

    async def _offer_configmap(
        self, current: ConfigMapState | None, default_poll: float, base: Mapping[str, str], base_source: str
    ) -> float:
        """Offer what the ConfigMap holds (the base policy when it is absent); returns its PollInterval."""
        files = base if current is None else current.data
        with contextlib.suppress(FaultPolicyError):  # logged and recorded by offer()
            await self.offer(files, "configmap" if current is not None else base_source)
        return poll_interval(files, default_poll)

    async def _poll_configmap(
        self, configmaps: ConfigMaps, default_poll: float, base: Mapping[str, str], base_source: str
    ) -> None:
        """Read the policy ConfigMap every PollInterval (waking early when a watch of it says it changed)."""
        interval = default_poll
        while True:
            current = None
            try:
                current = await configmaps.get(NAMESPACE, POLICY_CONFIGMAP)
                interval = await self._offer_configmap(current, default_poll, base, base_source)
            except Exception as exc:  # the API may be down: keep the policy we have
                log.warning("cannot read the fault policy ConfigMap", extra={"error": str(exc)})
            await self._until_change(configmaps, interval, current.resource_version if current else None)

    async def _until_change(self, configmaps: ConfigMaps, interval: float, resource_version: str | None) -> None:
        """Watch the policy ConfigMap for up to `interval`; PollInterval alone when a watch is not possible."""
        wait_change = getattr(configmaps, "wait_change", None)
        if wait_change is None:
            await asyncio.sleep(interval)
            return
        started = asyncio.get_running_loop().time()
        try:
            await wait_change(NAMESPACE, POLICY_CONFIGMAP, interval, resource_version)
        except WatchUnavailable as exc:
            log.info("no watch on the policy ConfigMap; polling", extra={"error": str(exc)})
            await asyncio.sleep(max(0.0, interval - (asyncio.get_running_loop().time() - started)))
