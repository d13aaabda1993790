"""Wires the fault-manager together and runs it until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass

from ascend_common.clients.exporter import ExporterClient
from ascend_common.clock import SystemClock
from ascend_common.faults import (
    default_fault_code_table,
    default_fault_customization,
    load_fault_code_table,
    load_fault_customization,
)
from ascend_common.serving import bind_unix_socket, server
from ascend_common.settings import parse_host_port

from fault_manager.api import create_api, create_ops_app
from fault_manager.configmaps import ApiConfigMaps, ConfigMaps, OfflineConfigMaps
from fault_manager.engine import FaultEngine, Policy
from fault_manager.service import FaultManager
from fault_manager.settings import FaultManagerSettings
from fault_manager.store import Store

log = logging.getLogger(__name__)


def load_policy(settings: FaultManagerSettings) -> Policy:
    """The packaged reference tables, or the files of --policy-dir (each checked before use)."""
    table, custom = default_fault_code_table(), default_fault_customization()
    if settings.policy_dir is not None:
        code_file = settings.policy_dir / "faultCode.json"
        custom_file = settings.policy_dir / "faultCustomization.json"
        if code_file.exists():
            table = load_fault_code_table(code_file.read_bytes())
        if custom_file.exists():
            custom = load_fault_customization(custom_file.read_bytes())
    return Policy(table, custom)


@dataclass
class Service:
    settings: FaultManagerSettings
    fm: FaultManager
    offline: OfflineConfigMaps | None
    exporter: ExporterClient
    store: Store

    @classmethod
    def build(cls, settings: FaultManagerSettings) -> Service:
        clock = SystemClock(time_scale=settings.time_scale)
        store = Store(settings.db)
        exporter = ExporterClient(settings.exporter_socket)
        offline: OfflineConfigMaps | None = None
        configmaps: ConfigMaps
        if settings.kube == "offline":
            offline = OfflineConfigMaps(settings.state_dir / "kube")
            configmaps = offline
        else:
            from ascend_common.kube.client import build_api_client

            configmaps = ApiConfigMaps(build_api_client(kubeconfig=settings.kubeconfig))
        engine = FaultEngine(load_policy(settings), time_scale=settings.time_scale)
        fm = FaultManager(
            store, engine, exporter, configmaps, clock, settings.node_name,
            write_interval=settings.write_interval, refresh_period=settings.refresh_period,
        )  # fmt: skip
        return cls(settings, fm, offline, exporter, store)


async def serve(service: Service) -> None:
    s = service.settings
    api_sock = bind_unix_socket(s.socket, group=s.socket_group)
    host, port = parse_host_port(s.metrics_addr)
    api = server(create_api(service.fm, service.offline))
    ops = server(create_ops_app(service.fm), host=host, port=port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await service.fm.start()
    tasks = [asyncio.create_task(api.serve(sockets=[api_sock])), asyncio.create_task(ops.serve())]
    log.info("fault-manager serving", extra={"socket": str(s.socket), "kube": s.kube, "db": str(s.db)})
    await stop.wait()
    log.info("fault-manager stopping")
    api.should_exit = ops.should_exit = True
    await asyncio.wait(tasks, timeout=5)
    await service.fm.stop()
    await service.exporter.close()
    await asyncio.to_thread(service.store.close)
    with contextlib.suppress(FileNotFoundError):
        s.socket.unlink()
