"""The exporter's local API (Unix socket); its ops endpoints are `ascend_common.adapters.ops` (server.py).

Handlers read the snapshot; the only ones that reach the library are the mutating calls,
and those go through the call pool with a timeout. Mutating calls declare the token scope they
need (`Bearer`), which `RequestGuard` checks before any byte of the body is read; every body is
bounded by FastAPI's `max_body_size` (`MAX_BODY_BYTES`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

from ascend_common.adapters.guard import MAX_BODY_BYTES, Bearer, RequestGuard
from ascend_common.schemas import sim as simreq
from ascend_common.schemas.exporter import (
    ApiError,
    Chip,
    ChipList,
    ContainerMapping,
    EventType,
    GapData,
    NodeInfo,
    ResetJob,
    ResetRequest,
    StreamHello,
    Vnpu,
    VnpuCreateRequest,
)
from ascend_common.tokens import Scope
from ascend_common.vnpu import ALLOWED_TEMPLATES, TEMPLATES
from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request, Response, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse, ServerSentEvent

from dcmi_exporter.backends.errors import BadParameter, CallTimeout, DcmiError, NoSuchDevice
from dcmi_exporter.jobs import ChannelUnsupported, ResetRefused
from dcmi_exporter.node.poller import chip_key
from dcmi_exporter.node.snapshot import Snapshot
from dcmi_exporter.runtime import Exporter

log = logging.getLogger(__name__)
KEEPALIVE_S = 15.0
# Before the node's first full read: a first read takes a poll period or a call timeout, not more.
RETRY_AFTER_S = 1
NOT_READ_YET = "the node's chips have not all been read yet: retry after the Retry-After seconds"
LogicId = Annotated[int, Path(ge=0, le=65535, description="the chip's logic id")]
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ApiError},
    403: {"model": ApiError},
    404: {"model": ApiError},
    409: {"model": ApiError},
    422: {"model": ApiError},
    503: {"model": ApiError, "description": "the node's chips have not all been read yet (Retry-After)"},
}


def _json(body: bytes) -> Response:
    return Response(content=body, media_type="application/json")


def library_error(exc: DcmiError) -> HTTPException:
    """Map a library refusal to a client-facing status: the caller can act on all of these."""
    if isinstance(exc, CallTimeout):
        return HTTPException(status.HTTP_504_GATEWAY_TIMEOUT, f"the library did not answer: {exc}")
    if isinstance(exc, NoSuchDevice):
        return HTTPException(status.HTTP_404_NOT_FOUND, f"library: {exc}")
    if isinstance(exc, BadParameter):
        return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"library rejected the parameters: {exc}")
    return HTTPException(status.HTTP_409_CONFLICT, f"library refused ({exc.code}): {exc}")


def create_api(exporter: Exporter) -> FastAPI:
    app = FastAPI(
        title="dcmi-exporter",
        version="1",
        description="Chip inventory, health, events, resets and vNPUs of one Ascend node.",
        max_body_size=MAX_BODY_BYTES,
    )
    app.add_middleware(RequestGuard, routes=lambda: app.routes)
    poller = exporter.poller

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = jsonable_encoder(exc.errors(), exclude={"url"})
        text = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
        return JSONResponse({"detail": f"invalid request: {text}", "errors": errors}, status_code=422)

    def need(scope: Scope) -> Any:
        return Depends(Bearer(scope, lambda: exporter.tokens))

    def whole() -> Snapshot:
        """The snapshot, once every chip was read: before, it lists none or some, and an answer from it
        would tell a client that a chip the node has does not exist."""
        snapshot = poller.snapshot
        if not snapshot.node.ready:
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE, NOT_READ_YET, headers={"Retry-After": str(RETRY_AFTER_S)}
            )
        return snapshot

    def chip_or_404(logic_id: int) -> Chip:
        chip = whole().by_logic.get(logic_id)
        if chip is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no chip with logic id {logic_id}")
        return chip

    @app.get("/v1/node", response_model=NodeInfo)
    async def get_node() -> Response:
        return _json(poller.snapshot.node_json)

    @app.get("/v1/chips", response_model=ChipList, responses={503: ERRORS[503]})
    async def list_chips() -> Response:
        return _json(whole().chips_json)

    @app.get("/v1/chips/{logic_id}", response_model=Chip, responses=ERRORS)
    async def get_chip(logic_id: LogicId) -> Response:
        body = whole().chip_json(logic_id)
        if body is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no chip with logic id {logic_id}")
        return _json(body)

    @app.get(
        "/v1/events",
        response_class=EventSourceResponse,
        responses={
            200: {"content": {"text/event-stream": {}}, "description": "server-sent events"},
            503: ERRORS[503],
        },
    )
    async def events(
        last_event_id: Annotated[str | None, Header(max_length=128)] = None,
        resume: Annotated[str | None, Query(max_length=128, description="same as Last-Event-ID")] = None,
    ) -> EventSourceResponse:
        # Its hello and first events are relative to a snapshot a client could not have read yet.
        whole()
        return EventSourceResponse(_stream(exporter, last_event_id or resume), ping=KEEPALIVE_S, sep="\n")

    @app.post(
        "/v1/chips/{logic_id}/reset",
        status_code=status.HTTP_202_ACCEPTED,
        response_model=ResetJob,
        responses=ERRORS,
        dependencies=[need(Scope.RESET)],
    )
    async def reset_chip(logic_id: LogicId, body: ResetRequest | None = None) -> ResetJob:
        chip_or_404(logic_id)
        try:
            return await exporter.jobs.start(logic_id, (body or ResetRequest()).channel)
        except ResetRefused as exc:
            raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
        except ChannelUnsupported as exc:
            raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None

    @app.get("/v1/jobs/{job_id}", response_model=ResetJob, responses=ERRORS)
    async def get_job(job_id: Annotated[str, Path(max_length=64)]) -> ResetJob:
        job = exporter.jobs.get(job_id)
        if job is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id!r}")
        return job

    @app.post(
        "/v1/chips/{logic_id}/vnpus",
        status_code=status.HTTP_201_CREATED,
        response_model=Vnpu,
        responses=ERRORS,
        dependencies=[need(Scope.VNPU)],
    )
    async def create_vnpu(logic_id: LogicId, body: VnpuCreateRequest) -> Vnpu:
        chip = chip_or_404(logic_id)
        if body.template not in TEMPLATES:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"unknown vNPU template {body.template!r}")
        if chip.family is None or body.template not in ALLOWED_TEMPLATES.get(chip.family, ()):
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                f"template {body.template!r} is not allowed on {chip.name} ({chip.family})",
            )
        addr = poller.address(logic_id)
        assert addr is not None
        try:
            vnpu = await exporter.guard.call(
                chip_key(logic_id), lambda: exporter.backend.create_vnpu(addr, body.template, body.vdev_id, body.vfg_id)
            )
        except DcmiError as exc:
            raise library_error(exc) from None
        poller.publish(
            EventType.VNPU, logic_id=logic_id, phy_id=chip.phy_id, chip=chip.name, vnpu=vnpu, vnpu_action="created"
        )
        poller.refresh_soon(logic_id)
        log.info("vNPU created", extra={"chip": chip.name, "vdev_id": vnpu.vdev_id, "template": vnpu.template})
        return vnpu

    @app.delete(
        "/v1/chips/{logic_id}/vnpus",
        status_code=status.HTTP_204_NO_CONTENT,
        responses=ERRORS,
        dependencies=[need(Scope.VNPU)],
    )
    async def destroy_vnpu(logic_id: LogicId, vdev_id: Annotated[int, Query(ge=0, le=65535)]) -> Response:
        chip = chip_or_404(logic_id)
        addr = poller.address(logic_id)
        assert addr is not None
        known = chip.dynamic.vnpus.value if chip.dynamic and chip.dynamic.vnpus.is_ok else None
        gone = next((v for v in known or [] if v.vdev_id == vdev_id), None)
        try:
            await exporter.guard.call(chip_key(logic_id), lambda: exporter.backend.destroy_vnpu(addr, vdev_id))
        except DcmiError as exc:
            raise library_error(exc) from None
        if gone is not None:
            poller.publish(
                EventType.VNPU,
                logic_id=logic_id,
                phy_id=chip.phy_id,
                chip=chip.name,
                vnpu=gone,
                vnpu_action="destroyed",
            )
        poller.refresh_soon(logic_id)
        log.info("vNPU destroyed", extra={"chip": chip.name, "vdev_id": vdev_id})
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    @app.put(
        "/v1/containers",
        status_code=status.HTTP_204_NO_CONTENT,
        responses=ERRORS,
        dependencies=[need(Scope.CONTAINERS)],
    )
    async def put_containers(body: ContainerMapping) -> Response:
        """Who holds which chip, and which vNPU by its vdev id, for the metrics' pod labels; replaces
        the last mapping whole."""
        exporter.containers.replace(
            {entry.phy_id: entry.containers for entry in body.chips},
            {entry.vdev_id: entry.containers for entry in body.vnpus},
        )
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    @app.delete(
        "/v1/containers",
        status_code=status.HTTP_204_NO_CONTENT,
        responses=ERRORS,
        dependencies=[need(Scope.CONTAINERS)],
    )
    async def delete_containers() -> Response:
        exporter.containers.clear()
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    _sim_routes(app, exporter, need(Scope.SIM), chip_or_404)
    return app


def _sim_routes(app: FastAPI, exporter: Exporter, auth: Any, chip_or_404: Any) -> None:
    """Fault injection for the simulator; 404 on a node with a real library."""

    def sim() -> Any:
        if exporter.backend.kind != "sim":
            raise HTTPException(status.HTTP_404_NOT_FOUND, "the sim API exists only with the sim backend")
        return exporter.backend

    def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KeyError as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"not found: {exc}") from None
        except ValueError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None

    deps = [auth]
    kw: dict[str, Any] = {"dependencies": deps, "responses": ERRORS, "tags": ["sim"]}

    @app.post("/v1/sim/chips/{logic_id}/faults", status_code=204, **kw)
    async def inject(logic_id: LogicId, body: simreq.InjectFault) -> Response:
        chip_or_404(logic_id)
        run(sim().inject_fault, logic_id, body.code, body.assertion, severity=body.severity, persistent=body.persistent)
        return Response(status_code=204)

    @app.post("/v1/sim/chips/{logic_id}/bursts", **kw)
    async def burst(logic_id: LogicId, body: simreq.Burst) -> dict[str, int]:
        chip_or_404(logic_id)
        sent = run(sim().burst, logic_id, body.code, body.count, mode=body.mode, severity=body.severity)
        return {"events": int(sent)}

    @app.put("/v1/sim/cards/{card_id}/dropped", status_code=204, **kw)
    async def drop(card_id: Annotated[int, Path(ge=0, le=255)], body: simreq.CardDrop) -> Response:
        run(sim().drop_card, card_id, body.dropped)
        return Response(status_code=204)

    @app.put("/v1/sim/chips/{logic_id}/network", status_code=204, **kw)
    async def network(logic_id: LogicId, body: simreq.NetworkState) -> Response:
        chip_or_404(logic_id)
        run(sim().set_network, logic_id, body.healthy, event=body.event)
        return Response(status_code=204)

    @app.put("/v1/sim/chips/{logic_id}/ub-ports/{udie}/{port}", status_code=204, **kw)
    async def ub_port(
        logic_id: LogicId,
        udie: Annotated[int, Path(ge=0, le=15)],
        port: Annotated[int, Path(ge=0, le=63)],
        body: simreq.UbPort,
    ) -> Response:
        chip_or_404(logic_id)
        run(sim().set_ub_port, logic_id, udie, port, body.kind, body.up, enabled=body.enabled, event=body.event)
        return Response(status_code=204)

    @app.put("/v1/sim/chips/{logic_id}/hang", status_code=204, **kw)
    async def hang(logic_id: LogicId, body: simreq.Hang) -> Response:
        chip_or_404(logic_id)
        run(sim().hang, logic_id, body.seconds)
        return Response(status_code=204)

    @app.delete("/v1/sim/chips/{logic_id}/hang", status_code=204, **kw)
    async def release(logic_id: LogicId) -> Response:
        chip_or_404(logic_id)
        run(sim().release, logic_id)
        return Response(status_code=204)

    @app.put("/v1/sim/chips/{logic_id}/processes", status_code=204, **kw)
    async def processes(logic_id: LogicId, body: simreq.Processes) -> Response:
        chip_or_404(logic_id)
        run(sim().set_processes, logic_id, [(p.pid, p.memory_bytes) for p in body.processes])
        exporter.poller.refresh_soon(logic_id)
        return Response(status_code=204)

    @app.put("/v1/sim/chips/{logic_id}/idle-job", status_code=204, **kw)
    async def idle_job(logic_id: LogicId, body: simreq.IdleJob) -> Response:
        chip_or_404(logic_id)
        run(sim().start_idle_job, logic_id, body.pids)
        exporter.poller.refresh_soon(logic_id)
        return Response(status_code=204)

    @app.delete("/v1/sim/chips/{logic_id}/idle-job", status_code=204, **kw)
    async def end_idle_job(logic_id: LogicId) -> Response:
        chip_or_404(logic_id)
        run(sim().end_idle_job, logic_id)
        exporter.poller.refresh_soon(logic_id)
        return Response(status_code=204)

    @app.post("/v1/sim/chips/{logic_id}/reset-failure", status_code=204, **kw)
    async def reset_failure(logic_id: LogicId, body: simreq.ResetFailure) -> Response:
        chip_or_404(logic_id)
        run(sim().fail_next_reset, logic_id, mode=body.mode, code=body.code)
        return Response(status_code=204)

    @app.post("/v1/sim/switch-faults", status_code=204, **kw)
    async def switch_fault(body: simreq.SwitchFault) -> Response:
        run(
            sim().switch_fault,
            alarm_id=body.alarm_id,
            fault_id=body.fault_id,
            position=body.position,
            switch_chip_id=body.switch_chip_id,
            switch_port_id=body.switch_port_id,
            assertion=body.assertion,
            severity=body.severity,
        )
        return Response(status_code=204)


async def _stream(exporter: Exporter, last_event_id: str | None) -> AsyncIterator[ServerSentEvent | bytes]:
    """The hello, a gap if the reader cannot resume where it asked, then the ring buffer's frames
    (encoded once at publish, for every reader)."""
    log_ = exporter.events
    node = exporter.poller.snapshot.node
    hello = StreamHello(run_id=log_.run_id, subscription=node.subscription, last_event_id=log_.head_id)
    exporter.stream_clients += 1
    try:
        yield ServerSentEvent(hello.model_dump_json(), event="hello", sep="\n")
        start = log_.resume(last_event_id)
        cursor = start.seq
        if start.gap is not None:
            yield _gap_frame(start.gap)

        def evicted(behind: int) -> bytes:  # this reader fell behind the ring buffer
            gap = GapData(reason="evicted", requested=log_.make_id(behind), resume_after=log_.head_id)
            return _gap_frame(gap).encode()

        async for frame in log_.frames(cursor, evicted):
            yield frame
    finally:
        exporter.stream_clients -= 1


def _gap_frame(gap: GapData) -> ServerSentEvent:
    # The gap carries the id the reader is now at, so a reader that reconnects after
    # re-reading the snapshot resumes from there instead of meeting the same gap again.
    return ServerSentEvent(gap.model_dump_json(), event="gap", id=gap.resume_after, sep="\n")


__all__ = ["create_api"]
