"""The fault-manager's API (Unix socket), and its readiness for the ops endpoints (`ascend_common.adapters.ops`).

Every body is bounded by FastAPI's `max_body_size` (`MAX_BODY_BYTES`; the policy's PUT declares
more); `RequestGuard` refuses a declared length past it before the route runs. The API has no
tokens: the socket's mode and group say who may call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Protocol

from ascend_common.adapters.guard import MAX_BODY_BYTES, RequestGuard
from ascend_common.adapters.kube.configmaps import OfflineConfigMaps
from ascend_common.adapters.ops import Readiness
from ascend_common.faults import FaultPolicyError
from ascend_common.schemas.exporter import ApiError
from ascend_common.schemas.verdict import VERDICT_EVENTS_PATH, VERDICTS_PATH, VerdictList
from fastapi import FastAPI, Header, HTTPException, Path, Query, Request, Response, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from fault_manager.hotreset.loop import HotReset
from fault_manager.metrics import NodeView
from fault_manager.policy.keeper import PolicyKeeper
from fault_manager.reactor.verdicts import KEEPALIVE_S
from fault_manager.store import FaultEventRow, ResetAttemptRow, in_store_thread

ChipName = Annotated[str, Path(pattern=r"^(Ascend910|Ascend310P|Ascend310|npu)-\d{1,4}$", max_length=32)]
ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ApiError}, 409: {"model": ApiError}, 422: {"model": ApiError}}
# PolicyFiles: up to 4 files of up to 1 Mi characters each, which JSON escaping can double.
POLICY_BODY_BYTES = 10 << 20


class Separations(Protocol):
    """Operators' isolations, as inputs of the reactor (fault_manager.reactor.inputs.Inbox)."""

    async def set_manual(self, chip: str, on: bool, by: str) -> None: ...


class History(Protocol):
    """The stored fault events the API pages through (fault_manager.store.FaultEventLog)."""

    def page(
        self, chip: str, since_ms: int | None, until_ms: int | None, limit: int, before_id: int | None
    ) -> list[FaultEventRow]: ...


class ResetLog(Protocol):
    """The stored reset attempts (fault_manager.store.ResetAttempts)."""

    def recent(self, limit: int) -> list[ResetAttemptRow]: ...


class FaultRecord(BaseModel):
    model_config = ConfigDict(frozen=True)
    event_id: str
    chip: str
    code: str
    assertion: str
    severity: int | None
    source: str
    raised_at_ms: int


class FaultPage(BaseModel):
    chip: str
    faults: list[FaultRecord]
    next_before_id: int | None  # pass as before_id for the next (older) page


class Separation(BaseModel):
    chip: str
    manually_separated: bool


class PolicyFiles(BaseModel):
    """Policy files by name (faultCode.json, faultCustomization.json, SwitchFaultCode.json), as JSON text."""

    model_config = ConfigDict(extra="forbid")
    files: Annotated[dict[str, Annotated[str, Field(max_length=1 << 20)]], Field(max_length=4)]


class PolicyView(BaseModel):
    source: str
    digest: str
    last_error: str | None
    writable: bool  # False: the policy comes from the ConfigMap (PUT answers 409)


class ResetAttemptView(BaseModel):
    id: int
    chips: list[str]
    channel: str
    started_ms: int
    finished_ms: int | None
    outcome: str | None  # succeeded | failed | refused; None while it runs
    error_code: int | None
    reason: str | None = None  # why it failed or was refused


class OperatorView(BaseModel):
    chips: list[str]
    reason: str
    since_ms: int


class ResetStarted(BaseModel):
    chips: list[str]  # the reset group; follow it in GET /v1/resets


class ResetsView(BaseModel):
    enabled: bool  # --hot-reset
    attempts: list[ResetAttemptView]  # newest first
    operator: list[OperatorView]  # groups hot reset cannot heal: an operator must act
    reset_info: dict[str, Any] | None = None  # the node annotation ResetInfo as written (reference schema)
    tokens: dict[str, int] = {}  # reset tokens left per chip (3 per faulty chip, refilled 6 h after the last refill)


def create_api(
    node: NodeView,
    separations: Separations,
    history: History,
    reset_log: ResetLog,
    offline: OfflineConfigMaps | None,
    keeper: PolicyKeeper,
    hot_reset: HotReset | None = None,
) -> FastAPI:
    app = FastAPI(
        title="fault-manager",
        version="1",
        description="Verdicts, fault history and isolation of one node.",
        max_body_size=MAX_BODY_BYTES,
    )
    app.add_middleware(RequestGuard, routes=lambda: app.routes)  # a declared length past the bound: 413 up front

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = jsonable_encoder(exc.errors(), exclude={"url"})
        text = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
        return JSONResponse({"detail": f"invalid request: {text}", "errors": errors}, status_code=422)

    def known(chip: str) -> None:
        if chip not in node.chips():
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no chip {chip!r} on this node")

    @app.get(VERDICTS_PATH, response_model=VerdictList)
    async def verdicts() -> Response:
        return Response(node.board.listing().model_dump_json(), media_type="application/json")

    @app.get(
        VERDICT_EVENTS_PATH,
        response_class=EventSourceResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": "server-sent events"}},
    )
    async def verdict_events(
        last_event_id: Annotated[str | None, Header(max_length=32)] = None,
    ) -> EventSourceResponse:
        return EventSourceResponse(node.board.stream(last_event_id), ping=KEEPALIVE_S, sep="\n")

    @app.get("/v1/faults", response_model=FaultPage, responses=ERRORS)
    async def faults(
        chip: Annotated[str, Query(pattern=r"^(Ascend910|Ascend310P|Ascend310|npu)-\d{1,4}$", max_length=32)],
        since_ms: Annotated[int | None, Query(ge=0, le=2**53)] = None,
        until_ms: Annotated[int | None, Query(ge=0, le=2**53)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        before_id: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    ) -> FaultPage:
        rows = await in_store_thread(history.page, chip, since_ms, until_ms, limit, before_id)
        records = [
            FaultRecord(event_id=r.event_id, chip=r.chip, code=r.code, assertion=r.assertion, severity=r.severity,
                        source=r.source, raised_at_ms=r.raised_at_ms)
            for r in rows
        ]  # fmt: skip
        return FaultPage(chip=chip, faults=records, next_before_id=rows[-1].id if len(rows) == limit else None)

    @app.post("/v1/chips/{chip}/separation", response_model=Separation, responses=ERRORS)
    async def separate(chip: ChipName) -> Separation:
        known(chip)
        await separations.set_manual(chip, True, "api")
        return Separation(chip=chip, manually_separated=True)

    @app.delete("/v1/chips/{chip}/separation", response_model=Separation, responses=ERRORS)
    async def unseparate(chip: ChipName) -> Separation:
        known(chip)
        await separations.set_manual(chip, False, "api")
        return Separation(chip=chip, manually_separated=False)

    def policy_view() -> PolicyView:
        st = keeper.status
        return PolicyView(source=st.source, digest=st.digest, last_error=st.last_error, writable=offline is not None)

    @app.get("/v1/policy", response_model=PolicyView)
    async def get_policy() -> PolicyView:
        return policy_view()

    @app.put("/v1/policy", response_model=PolicyView, responses=ERRORS, max_body_size=POLICY_BODY_BYTES)
    async def put_policy(body: PolicyFiles) -> PolicyView:
        if offline is None:
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                "the fault policy comes from ConfigMap kube-system/mindx-dl-fault-config; edit that instead",
            )
        try:
            await keeper.offer(body.files, "api")
        except FaultPolicyError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"policy rejected: {exc}") from None
        return policy_view()

    @app.post("/v1/chips/{chip}/reset", status_code=status.HTTP_202_ACCEPTED, response_model=ResetStarted,
              responses=ERRORS)  # fmt: skip
    async def reset_chip(chip: ChipName) -> ResetStarted:
        known(chip)
        if hot_reset is None:
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                "resets need --hot-reset (or --hot-reset-mode 0) and the fault-manager's reset token",
            )
        group, reason = await hot_reset.request(chip)
        if reason is not None:
            raise HTTPException(status.HTTP_409_CONFLICT, f"not reset: {reason}")
        return ResetStarted(chips=group)

    @app.get("/v1/resets", response_model=ResetsView, responses=ERRORS)
    async def resets(limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> ResetsView:
        rows = await in_store_thread(reset_log.recent, limit)
        attempts = [
            ResetAttemptView(id=r.id, chips=list(r.chips), channel=r.channel, started_ms=r.started_ms,
                             finished_ms=r.finished_ms, outcome=r.outcome, error_code=r.error_code, reason=r.reason)
            for r in rows
        ]  # fmt: skip
        operator = [] if hot_reset is None else [
            OperatorView(chips=list(i.chips), reason=i.reason, since_ms=i.since_ms) for i in hot_reset.operator.values()
        ]  # fmt: skip
        tokens = {} if hot_reset is None else await hot_reset.tokens()
        info = None if hot_reset is None else json.loads(hot_reset.reset_info())
        return ResetsView(
            enabled=hot_reset is not None, attempts=attempts, operator=operator, reset_info=info, tokens=tokens
        )

    @app.get("/v1/kube/objects", responses=ERRORS)
    async def kube_objects() -> list[dict[str, Any]]:
        if offline is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, "the objects are in the cluster (--kube api)")
        return offline.listing()

    return app


def readiness(node: NodeView, not_ready: Callable[[], str | None]) -> Readiness:
    def ready() -> tuple[bool, dict[str, object]]:
        reason = not_ready()
        return (False, {"reason": reason}) if reason is not None else (True, {"chips": len(node.chips())})

    return ready
