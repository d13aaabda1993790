"""`/healthz`, `/readyz` and `/metrics` on TCP for kubelet probes and Prometheus."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ascend_device_plugin.metrics import PluginMetrics


def create_ops_app(metrics: PluginMetrics, readiness: Callable[[], tuple[bool, str]]) -> FastAPI:
    app = FastAPI(title="ascend-device-plugin ops", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        ok, reason = readiness()
        return JSONResponse({"status": "ready" if ok else "not ready", "reason": reason}, 200 if ok else 503)

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app
